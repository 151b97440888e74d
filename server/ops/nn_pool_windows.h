// The windows of the 2-d pools, after PyTorch's CPU kernels: which input rows and columns each
// output position reads and what its average divides by. max_pool2d (strides, padding,
// dilation, ceil_mode; the start moved in by whole dilation steps), avg_pool2d
// (count_include_pad, divisor_override) and the adaptive pools differ only in these rules, so
// every backend computes them here and runs the same windows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/ops/attrs.h"
#include "server/ops/nn_geometry.h"

namespace tensord::nn {

// The input rows hs, hs + dh, ... < he and columns ws, ws + dw, ... < we of one output
// position, and the divisor of its average. An empty window averages to 0.
struct PoolWindow {
  int64_t hs, he, ws, we;
  int64_t dh = 1, dw = 1;
  int64_t divisor = 1;
};

// Whether `op` (a pool or its _backward) takes maxima.
bool IsMaxPool(const std::string& op);

// The window of every output position, row-major over the output plane (the same in every
// plane), for max_pool2d, avg_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d or their
// _backward ops over input `x` and output `y`.
absl::StatusOr<std::vector<PoolWindow>> PoolWindows(const std::string& op, const Attrs& attrs,
                                                    const Nchw& x, const Nchw& y);

}  // namespace tensord::nn
