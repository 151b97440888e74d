// Shared by the linear-algebra product and diagonal op entries and their CPU kernels: where
// torch.diagonal's elements sit in a contiguous tensor, so that diagonal (a gather) and
// diagonal_backward (a scatter into zeros) walk the same strided window.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/shape.h"
#include "server/ops/op_def.h"
#include "server/ops/registry.h"

namespace tensord {

void RegisterLinalgProductOps(OpRegistry& r);  // dot, outer, addmm, baddbmm, trace, diag, diagonal
void RegisterLinalgEinsumOps(OpRegistry& r);   // einsum

namespace ops {

struct DiagonalSpec {
  int64_t dim1 = 0, dim2 = 1;  // wrapped into [0, rank)
  int64_t length = 0;          // elements on the diagonal (0 when the offset is past the matrix)
  Shape out;                   // the input's dims without dim1 and dim2, then `length`
  // The diagonal as a window of the contiguous input: first element and per-dim strides of
  // `out`, in elements. Meaningful only when the output is non-empty.
  int64_t window_offset = 0;
  std::vector<int64_t> window_strides;
};

// torch.diagonal(input, offset, dim1, dim2) on a tensor of shape `in`: negative dims wrap,
// equal dims and dims past the rank are BAD_ATTRIBUTE naming `op`.
absl::StatusOr<DiagonalSpec> ResolveDiagonal(const std::string& op, const Shape& in, int64_t offset,
                                             int64_t dim1, int64_t dim2);

// Runs `f` on f32 copies of bf16/f16 operands (all of one dtype) and rounds its results back
// once, as PyTorch's kernels accumulate in f32; a chain of 2-byte ops would round at every step.
// Other calls go to `f` unchanged.
CompositeFn ComputeLowPrecisionInF32(CompositeFn f);

}  // namespace ops
}  // namespace tensord
