// Renders the 2-d pools and their gradients over windows computed on the host
// (ops/nn_pool_windows.h), the same for every plane. The forward has one work item per output
// element; the gradient one per input element, summing the outputs whose windows hold it (their
// list is built on the host) in ascending order, as the CPU's loop adds them: deterministic
// and without atomics. A max pool's gradient goes to each window's first maximum, NaN winning,
// recomputed from the input.
#pragma once

#include <string>

#include "server/backends/gpu/codegen/kernel_source.h"

namespace tensord::gpu {

// Forward arguments: y, [indices (int64)], x, windows (int64: hs, he, ws, we, divisor per
// output position), n (elements of y), out_plane, width (input), in_plane, dh, dw.
// Gradient arguments: gx, gy, [x (max)], windows, lists (CSR over input positions: lists[p]
// and lists[p + 1] bound p's entries, which are output positions), n (elements of gx),
// out_plane, width, in_plane, dh, dw.
std::string RenderPool2d(const Dialect& dialect, const std::string& name, DType dtype, bool max,
                         bool backward, bool indices);

}  // namespace tensord::gpu
