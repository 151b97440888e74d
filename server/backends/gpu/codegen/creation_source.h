// Renders the creation ops that compute their values (arange, eye) and the random ones (rand,
// randn, randint, native_dropout): each element from its index alone. The random kernels evaluate
// the SplitMix64 stream of ops/random_stream.h at the element's own position, so a seed gives the
// same numbers on every device (randn's up to the device's log, sqrt, cos and sin).
#pragma once

#include <string>

#include "server/backends/gpu/codegen/kernel_source.h"

namespace tensord::gpu {

// arange: out[i] = start + step * i, in double for floats and in int64 for integers.
// Arguments: out, n, start, step (double), start_int, step_int (int64).
std::string RenderArange(const Dialect& dialect, const std::string& name, DType dtype);
// eye: 1 where row == col of an [rows, cols] output. Arguments: out, n, cols (int64).
std::string RenderEye(const Dialect& dialect, const std::string& name, DType dtype);

enum class Stream {
  kUniform,  // rand: [0, 1)
  kNormal,   // randn: Box-Muller on values 2k + 1 and 2k + 2 for the pair k
  kDropout,  // native_dropout: x * (kept ? scale : 0)
};
// Arguments: out, [x (dropout)], n, start (uint64), p (double), scale (the dtype).
std::string RenderStream(const Dialect& dialect, const std::string& name, DType dtype, Stream what);
// randint: out[i] = low + ops::RandintOffset(start, i, range), redraws included.
// Arguments: out, n, start, low (int64), range, reject_below (uint64: 2^64 % range).
std::string RenderRandint(const Dialect& dialect, const std::string& name, DType dtype);

}  // namespace tensord::gpu
