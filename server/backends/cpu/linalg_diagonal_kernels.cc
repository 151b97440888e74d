// Kernels of diagonal and diagonal_backward: the diagonal is a strided window of the
// contiguous input (one stride per remaining dim, plus the sum of the two matrix strides), so
// the forward gathers it and the backward scatters into zeros with the same walk. Both copy
// bytes, so bf16 and f16 need no trip through f32.
#include <cstring>

#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/strided_copy.h"
#include "server/ops/linalg_products.h"

namespace tensord::cpu {
namespace {

absl::Status DiagonalKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  ASSIGN_OR_RETURN(ops::DiagonalSpec s,
                   ops::ResolveDiagonal("diagonal", x.shape(), c.attrs.GetInt("offset"),
                                        c.attrs.GetInt("dim1"), c.attrs.GetInt("dim2")));
  if (out.numel() == 0) return absl::OkStatus();
  CopyFromWindow(x, s.window_offset, s.window_strides, out);
  return absl::OkStatus();
}

absl::Status DiagonalBackwardKernel(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  Tensor& out = c.outputs[0];
  ASSIGN_OR_RETURN(ops::DiagonalSpec s,
                   ops::ResolveDiagonal("diagonal_backward", out.shape(), c.attrs.GetInt("offset"),
                                        c.attrs.GetInt("dim1"), c.attrs.GetInt("dim2")));
  if (out.nbytes()) std::memset(out.raw(), 0, out.nbytes());
  if (g.numel() == 0) return absl::OkStatus();
  CopyIntoWindow(g, out, s.window_offset, s.window_strides);
  return absl::OkStatus();
}

}  // namespace

void RegisterLinalgDiagonalKernels(KernelTable& t) {
  t.Add("diagonal", "strided_diagonal", kFloat | kLowPrecision, DiagonalKernel);
  t.Add("diagonal_backward", "strided_diagonal_backward", kFloat | kLowPrecision,
        DiagonalBackwardKernel);
}

}  // namespace tensord::cpu
