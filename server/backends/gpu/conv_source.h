// Renders conv2d and its two gradients as direct kernels: one work item per element of the
// tensor being written (output, input gradient, weight gradient), summing its taps in the order
// the CPU's loop adds them, so no two work items write one element and no atomics are needed.
// Sizes are run-time arguments (a geometry buffer), so one kernel per (pass, dtype, bias)
// serves every shape, stride, padding, dilation and group count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/backends/gpu/kernel_source.h"

namespace tensord::gpu {

enum class ConvPass {
  kForward,     // y (out) from x (a), w (b), [bias (c)]
  kInputGrad,   // gx (out) from gy (a), w (b)
  kWeightGrad,  // gw (out) from gy (a), x (b)
};
// Arguments: out, a, b, [c], geometry (ConvGeometry), n (elements of out).
std::string RenderConv2d(const Dialect& dialect, const std::string& name, DType dtype,
                         ConvPass pass, bool bias);

// The geometry buffer: N, C, H, W (input), OC, OH, OW (output), KH, KW, groups, then stride,
// padding and dilation (h, w each).
struct ConvSizes {
  int64_t n, c, h, w, oc, oh, ow, kh, kw, groups;
  int64_t stride[2], padding[2], dilation[2];
  std::vector<int64_t> Flat() const;
};

}  // namespace tensord::gpu
