// The batched GEMM every linear-algebra op reduces to (matmul, mm, bmm, linear and the internal
// batch_matmul of their gradients), shared by the oneDNN kernel and the loop reference.
#pragma once

#include "absl/status/statusor.h"
#include "server/backends/backend.h"
#include "server/core/tensor.h"

namespace tensord::cpu {

// c[b] = op(a[b]) · op(b[b]) (+ bias on every row), op = optional transpose of the two
// innermost dims. Operands are contiguous; a stored transposed operand is read in place.
struct GemmProblem {
  DType dtype = DType::kF32;
  Shape batch, a_batch, b_batch;  // equal ranks; operand batch dims of 1 broadcast
  int64_t n = 1, k = 1, m = 1;
  bool ta = false, tb = false;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  // A bias of 1 or m values added to every output row (linear), fused into the GEMM.
  const void* bias = nullptr;
  int64_t bias_n = 0;
  // A bias of another broadcastable shape, added after the product.
  const Tensor* unfused_bias = nullptr;
  int64_t batch_count() const { return NumElements(batch); }
};

// How an op's operands form its product: matmul, mm and bmm by their ranks; linear with a
// transposed weight and an optional bias; batch_matmul with its transpose attributes.
enum class GemmForm { kMatmul, kLinear, kBatchMatmul };
// The ops of the linear-algebra kernels, each with its form (registered by both kernel sets).
struct GemmOp {
  const char* op;
  GemmForm form;
};
inline constexpr GemmOp kGemmOps[] = {{"matmul", GemmForm::kMatmul},
                                      {"mm", GemmForm::kMatmul},
                                      {"bmm", GemmForm::kMatmul},
                                      {"linear", GemmForm::kLinear},
                                      {"batch_matmul", GemmForm::kBatchMatmul}};

// The problem of a call of that form (shapes already validated).
absl::StatusOr<GemmProblem> GemmFor(const KernelCall& call, GemmForm form);

// Merges batch dims where no broadcasting happens, and folds the batch of `a` into its rows
// when `b` is shared by every batch entry: one large GEMM instead of many small ones.
void SimplifyGemm(GemmProblem& p);

// Loop reference (any float type). Handles k == 0 and empty outputs.
template <typename T>
void LoopGemm(const GemmProblem& p);

// out += bias broadcast to out's shape (the unfused bias of linear).
void AddBroadcastBias(const Tensor& bias, Tensor& out);

}  // namespace tensord::cpu
