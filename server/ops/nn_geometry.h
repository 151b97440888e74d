// Shape arithmetic shared by the linear-algebra and neural-network op entries and their CPU
// kernels: matmul broadcasting, convolution and pooling window geometry. The op entries
// validate with these; kernels re-read already validated attributes through them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/shape.h"
#include "server/ops/attrs.h"

namespace tensord::nn {

// ---- matmul -----------------------------------------------------------------------------------
// A batched product out[b] = op(A[b]) · op(B[b]) with op = optional transpose of the last two
// dims and batch dims broadcast. `a_batch` / `b_batch` are left-padded with 1 to `batch`'s rank.
struct MatmulPlan {
  Shape batch;
  Shape a_batch, b_batch;
  int64_t n = 1, k = 1, m = 1;
  Shape out;  // the op's output shape (torch.matmul drops the dims it added to 1-d operands)
};

// torch.matmul's rules: 1-d·1-d is a dot product, a 1-d first operand gets a leading 1, a 1-d
// second operand a trailing 1 (both dropped again), batch dims broadcast.
absl::StatusOr<MatmulPlan> PlanMatmul(const std::string& op, const Shape& a, const Shape& b);
// Operands of rank >= 2 with optional transposes (the internal batch_matmul op).
absl::StatusOr<MatmulPlan> PlanBatchMatmul(const std::string& op, const Shape& a, const Shape& b,
                                           bool transpose_a, bool transpose_b);

// SHAPE_MISMATCH naming both operand shapes (metadata shape / other_shape).
absl::Status ShapeErrorWithShapes(const std::string& op, const Shape& a, const Shape& b,
                                  const std::string& what);

// ---- convolution and pooling ------------------------------------------------------------------
// Expands an int-list attribute given as one value or `n` values (PyTorch's _pair).
absl::StatusOr<std::vector<int64_t>> ExpandInts(const std::string& op, const std::string& attr,
                                                const std::vector<int64_t>& value, size_t n);

struct Conv2dParams {
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  int64_t groups = 1;
};
absl::StatusOr<Conv2dParams> ReadConv2dParams(const std::string& op, const Attrs& attrs);

struct Pool2dParams {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  bool ceil_mode = false;
};
// kernel_size, stride (empty = kernel_size), padding, dilation (max only), ceil_mode.
absl::StatusOr<Pool2dParams> ReadPool2dParams(const std::string& op, const Attrs& attrs,
                                              bool max_pool);
absl::StatusOr<Shape> Pool2dOutputShape(const std::string& op, const Shape& input,
                                        const Pool2dParams& p);
// PyTorch's pooling_output_shape for one spatial dim.
int64_t PoolOutputSize(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                       bool ceil_mode);

// [N, C, H, W] view of a 3-d or 4-d activation shape.
struct Nchw {
  int64_t n, c, h, w;
};
Nchw AsNchw(const Shape& s);

// ---- convolutions of 1 to 3 spatial dims (conv3d, conv_transpose2d) -----------------------------
// One value per spatial dim; output_padding only for transposed convolutions.
struct ConvNdParams {
  int spatial = 2;
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups = 1;
  bool transposed = false;
};
absl::StatusOr<ConvNdParams> ReadConvNdParams(const std::string& op, const Attrs& attrs,
                                              int spatial, bool transposed);
// Checks input [N, C, *spatial] or [C, *spatial] against the weight (conv: [O, C/groups, *k],
// transposed: [C, O/groups, *k]) and returns the output shape (rank of the input).
absl::StatusOr<Shape> ConvNdOutputShape(const std::string& op, const Shape& input,
                                        const Shape& weight, const ConvNdParams& p);
// The shape of a bias the weight accepts: its output channels.
int64_t ConvNdOutChannels(const Shape& weight, const ConvNdParams& p);

// A convolution as one correlation, y[n, o, p] += x[n, c, p * stride - padding + tap * dilation]
// * w[o, c, tap] within each group, with the spatial dims left-padded to three unit dims. A
// transposed convolution is the same correlation with its input in the y role and its output
// in the x role. Every backend walks it from one of its three operands.
struct Correlation {
  int64_t n = 1, groups = 1, xc = 0, yc = 0, cin_g = 0, cout_g = 0;
  int64_t xs[3], ys[3], k[3], stride[3], pad[3], dil[3];
};
// x, w and y in their correlation roles (batched or not).
Correlation MakeCorrelation(const Shape& x, const Shape& w, const Shape& y, const ConvNdParams& p);

// ---- a convolution's padding='valid' / 'same'
// ---------------------------------------------------- PyTorch's string forms of conv1d/2d/3d's
// padding. 'valid' is no padding; 'same' (stride 1 only) pads dilation * (kernel - 1) per spatial
// dim, the larger half after: `before` and `after` differ by one where that total is odd.
struct PaddingFromString {
  std::vector<int64_t> before, after;
};
bool HasPaddingString(const Attrs& attrs);
absl::StatusOr<PaddingFromString> ResolvePaddingString(const std::string& op, const Attrs& attrs,
                                                       const Shape& weight, int spatial);

// ---- adaptive pooling -------------------------------------------------------------------------
// output_size as (oH, oW) (one value: square), each non-negative or kKeepInputSize: PyTorch's
// None (that dim keeps the input's size), which an int list cannot carry.
inline constexpr int64_t kKeepInputSize = -1;
absl::StatusOr<std::vector<int64_t>> ReadAdaptiveOutputSize(const std::string& op,
                                                            const Attrs& attrs);
absl::StatusOr<Shape> AdaptivePool2dOutputShape(const std::string& op, const Shape& input,
                                                const std::vector<int64_t>& output_size);
// PyTorch's adaptive window of output index i: [floor(i*in/out), ceil((i+1)*in/out)).
inline int64_t AdaptiveStart(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
inline int64_t AdaptiveEnd(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

}  // namespace tensord::nn
