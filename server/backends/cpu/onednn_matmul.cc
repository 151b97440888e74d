// oneDNN matmul for the f32 linear-algebra ops. Operands are wrapped in place: a transposed
// operand is described by its strides and broadcast batch dims by dims of 1, so no call copies.
#include <unordered_map>

#include "server/backends/cpu/linalg_kernels.h"
#include "server/backends/cpu/onednn_common.h"

namespace tensord::cpu::onednn {
namespace {

using dnnl::memory;

// Descriptor of one operand: batch dims (contiguous, matrices of rows x cols stored row-major,
// or column-major when transposed) followed by the logical [rows, cols].
memory::desc OperandDesc(const Shape& batch, int64_t rows, int64_t cols, bool transposed) {
  memory::dims dims(batch.begin(), batch.end());
  dims.push_back(rows);
  dims.push_back(cols);
  memory::dims strides(dims.size());
  const size_t r = dims.size();
  strides[r - 2] = transposed ? 1 : cols;
  strides[r - 1] = transposed ? rows : 1;
  int64_t step = rows * cols;
  for (int d = static_cast<int>(r) - 3; d >= 0; --d) {
    strides[d] = step;
    step *= std::max<int64_t>(dims[d], 1);
  }
  return memory::desc(dims, memory::data_type::f32, strides);
}

}  // namespace

bool RunGemm(const GemmProblem& p, const PostOpChain* chain) {
  if (p.batch_count() == 0 || p.n == 0 || p.m == 0 || p.k == 0 ||
      p.batch.size() + 2 > DNNL_MAX_NDIMS) {
    // Nothing to multiply (k == 0 leaves zeros plus bias) or beyond oneDNN's rank limit.
    LoopGemm<float>(p);
    return false;
  }
  const memory::desc a = OperandDesc(p.a_batch, p.n, p.k, p.ta);
  const memory::desc b = OperandDesc(p.b_batch, p.k, p.m, p.tb);
  const memory::desc c = OperandDesc(p.batch, p.n, p.m, false);
  memory::desc bias;
  if (p.bias != nullptr) bias = OperandDesc(Shape(p.batch.size(), 1), 1, p.bias_n, false);
  const auto key = [&] {
    std::string key = absl::StrCat("matmul|", DescKey(a), DescKey(b), DescKey(c));
    if (p.bias != nullptr) absl::StrAppend(&key, "|bias", DescKey(bias));
    if (chain != nullptr) absl::StrAppend(&key, "|post", chain->Key());
    return key;
  };
  // A kernel may multiply several times (a product's gradients): each product must find its
  // own primitive.
  const auto fits = [&](const CachedPrimitive& prim) {
    return prim.pd.src_desc() == a && prim.pd.weights_desc() == b && prim.pd.dst_desc() == c;
  };
  auto prim = GetPrimitive(
      "matmul", key,
      [&] {
        dnnl::matmul::desc d =
            p.bias != nullptr ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c);
        dnnl::matmul::primitive_desc pd(d, AttrWith(chain), Engine());
        return CachedPrimitive{dnnl::matmul(pd), pd};
      },
      fits);
  Args args = {
      {DNNL_ARG_SRC, WrapPtr(p.a, a)},
      {DNNL_ARG_WEIGHTS, WrapPtr(p.b, b)},
      {DNNL_ARG_DST, WrapPtr(p.c, c)},
  };
  if (p.bias != nullptr) args.emplace(DNNL_ARG_BIAS, WrapPtr(p.bias, bias));
  if (chain != nullptr) {
    for (const PostOpChain::Operand& o : chain->operands) {
      args.emplace(PostOperandArg(o), Wrap(*o.tensor, o.plain));  // plain: as the result
    }
  }
  Execute(*prim, std::move(args));
  return true;
}

void RegisterMatmulKernels(KernelTable& t) {
  for (const GemmOp& g : kGemmOps) {
    t.Add(g.op, Kernel{std::string("onednn_") + g.op,
                       [](absl::Span<const DType> d, const Attrs*) { return AllF32(d); },
                       [form = g.form](KernelCall& call) -> absl::Status {
                         return Guard(call.op.name, [&]() -> absl::Status {
                           ASSIGN_OR_RETURN(GemmProblem p, GemmFor(call, form));
                           SimplifyGemm(p);
                           RunGemm(p);
                           if (p.unfused_bias != nullptr) {
                             AddBroadcastBias(*p.unfused_bias, call.outputs[0]);
                           }
                           return absl::OkStatus();
                         });
                       }});
  }
}

}  // namespace tensord::cpu::onednn
