// The ops that backward rules and composites run by name. Rules write opname::mul, not "mul",
// so a misspelt name does not compile, and OpRegistry::Builtin() checks at start-up that
// every name listed here is registered: an entry naming no op stops the server before it
// serves, instead of failing in a user's backward pass. Add a name here when a rule first
// runs that op.
#pragma once

// X(name) for each op run by name.
#define TENSORD_OPS_RUN_BY_NAME(X)      \
  X(add)                                \
  X(all_gather)                         \
  X(all_reduce)                         \
  X(amax_backward)                      \
  X(assign)                             \
  X(batch_matmul)                       \
  X(binary_cross_entropy_elementwise)   \
  X(bmm)                                \
  X(broadcast)                          \
  X(cat)                                \
  X(clamp)                              \
  X(conv2d_backward_input)              \
  X(conv2d_backward_weight)             \
  X(cos)                                \
  X(cosh)                               \
  X(cross_entropy_log_softmax)          \
  X(cross_entropy_log_softmax_backward) \
  X(cross_entropy_nll)                  \
  X(cross_entropy_nll_backward)         \
  X(cumprod_backward)                   \
  X(cumsum_backward)                    \
  X(diagonal)                           \
  X(diagonal_backward)                  \
  X(div)                                \
  X(embedding_backward)                 \
  X(eq)                                 \
  X(exp)                                \
  X(expand)                             \
  X(flip)                               \
  X(gather)                             \
  X(ge)                                 \
  X(glu_backward)                       \
  X(gt)                                 \
  X(huber_loss_elementwise)             \
  X(index_add_internal)                 \
  X(index_select)                       \
  X(kl_div_elementwise)                 \
  X(l1_loss_elementwise)                \
  X(layer_norm)                         \
  X(layer_norm_backward)                \
  X(le)                                 \
  X(log)                                \
  X(logical_and)                        \
  X(logsumexp_backward)                 \
  X(lt)                                 \
  X(masked_fill)                        \
  X(masked_select)                      \
  X(masked_select_backward)             \
  X(matmul)                             \
  X(max_dim_backward)                   \
  X(mm)                                 \
  X(mul)                                \
  X(narrow)                             \
  X(native_batch_norm)                  \
  X(native_batch_norm_backward)         \
  X(native_dropout)                     \
  X(neg)                                \
  X(norm)                               \
  X(norm_backward)                      \
  X(ones)                               \
  X(ones_like)                          \
  X(pad)                                \
  X(pad_backward)                       \
  X(permute)                            \
  X(pow)                                \
  X(prelu_backward)                     \
  X(prod_backward)                      \
  X(reduce)                             \
  X(reduce_scatter)                     \
  X(reshape)                            \
  X(roll)                               \
  X(rsqrt)                              \
  X(scatter)                            \
  X(scatter_add_internal)               \
  X(sign)                               \
  X(sin)                                \
  X(sinh)                               \
  X(slice)                              \
  X(slice_backward)                     \
  X(smooth_l1_loss_elementwise)         \
  X(softmax)                            \
  X(squeeze)                            \
  X(sub)                                \
  X(sum)                                \
  X(to_device)                          \
  X(to_dtype)                           \
  X(transpose)                          \
  X(tril)                               \
  X(unsqueeze)                          \
  X(upsample)                           \
  X(upsample_backward)                  \
  X(var_backward)                       \
  X(where)                              \
  X(zeros)                              \
  X(zeros_like)

namespace tensord::opname {
#define TENSORD_OP_NAME_CONSTANT(name) inline constexpr char name[] = #name;
TENSORD_OPS_RUN_BY_NAME(TENSORD_OP_NAME_CONSTANT)
#undef TENSORD_OP_NAME_CONSTANT
}  // namespace tensord::opname
