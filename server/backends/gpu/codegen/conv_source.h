// Renders the convolutions (conv2d, conv3d, conv_transpose2d and their gradients) as direct
// kernels of one correlation (ops/nn_geometry.h: y[n, o, p] += x[n, c, p * stride - padding +
// tap * dilation] * w[o, c, tap] in three spatial dims). Each pass has one work item per
// element of the operand it writes and sums that element's taps in the order the CPU's loop
// adds them, so no two work items write one element and no atomics are needed. Sizes are
// run-time arguments, so one kernel per (pass, dtype, bias) serves every shape, stride,
// padding, dilation and group count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/backends/gpu/codegen/kernel_source.h"
#include "server/ops/nn_geometry.h"

namespace tensord::gpu {

// Which operand of the correlation a pass writes.
enum class ConvPass {
  kY,  // out (y role) = bias + sum of x * w: conv forward, transposed conv's input gradient
  kX,  // out (x role) = bias + sum of y * w: conv's input gradient, transposed conv forward
  kW,  // out = sum of y * x: the weight gradient
};
// Arguments: out, a, b, [bias], geometry (CorrelationFlat), n (elements of out). a and b are
// the pass's two operands in the order of the product above.
std::string RenderConv(const Dialect& dialect, const std::string& name, DType dtype, ConvPass pass,
                       bool bias);

// The geometry buffer: n, groups, xc, yc, cin_g, cout_g, then xs, ys, k, stride, pad, dil
// (three each).
std::vector<int64_t> CorrelationFlat(const nn::Correlation& g);

// ---- a correlation through the device's GEMM (conv_gemm.h) ------------------------------------
// The patches of images [n0, n0 + nc) of x as the columns of a matrix: the value of channel c,
// tap t and output position p of the chunk's image k (0 outside x, the padding) goes to
// cols[(c * TAPS + t) * row_stride + k * image_stride + p].
// Arguments: cols, x, geometry, n0, row_stride, image_stride, n (items: nc * XC * YP).
std::string RenderConvColumns(const Dialect& dialect, const std::string& name, DType dtype);
// Images [n0, n0 + nc) of x from columns laid out image after image (row_stride YP,
// image_stride XC * TAPS * YP): each element is the sum of the column entries of the taps that
// read it, added in the direct kX kernel's order. Arguments: x, cols, geometry, n0, n (items:
// nc * XC * XP).
std::string RenderConvFromColumns(const Dialect& dialect, const std::string& name, DType dtype);
// Images [n0, n0 + nc) of y with the channel before the image:
// out[(c * nc + k) * YP + p] = y[((n0 + k) * YC + c) * YP + p]. Arguments: out, y, geometry,
// n0, nc, n (items: nc * YC * YP).
std::string RenderConvChannelsFirst(const Dialect& dialect, const std::string& name, DType dtype);

}  // namespace tensord::gpu
