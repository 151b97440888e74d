// Renders upsample (interpolate) and its gradient over the taps the host computes
// (ops/nn_resample_taps.h): the forward has one work item per output element and sums its
// taps as the CPU's loop does; the gradient one per input element, summing the outputs whose
// taps read it (per-dim lists built on the host), so no atomics are needed.
#pragma once

#include <string>

#include "server/backends/gpu/codegen/kernel_source.h"

namespace tensord::gpu {

// Forward arguments: out, x, idx (int64: per dim, 2 per output index: tap 0 and tap 1), wts
// (the dtype, same layout), geometry (int64: in[3], out[3], ntaps), n (elements of out).
// Gradient arguments: out (gx), gy, wts, lists (int64 CSR per dim over input indices; entries
// are 2 * output index + tap), geometry (in[3], out[3], list bases[3]), n (elements of gx).
std::string RenderUpsample(const Dialect& dialect, const std::string& name, DType dtype,
                           bool backward);

}  // namespace tensord::gpu
