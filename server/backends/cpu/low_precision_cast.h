// Element conversion to and from the 2-byte storage dtypes (bf16, f16), for the cast and
// assign kernels: every pair of dtypes where one side is bf16 or f16.
#pragma once

#include <cstdint>

#include "server/core/dtype.h"

namespace tensord::cpu {

// Converts `n` contiguous elements. Values pass through float, as PyTorch's c10::BFloat16 and
// c10::Half conversions do: f64 and i64 sources are rounded to float first, then to 2 bytes;
// to integers truncates toward zero; to bool is `!= 0` (NaN is true).
void ConvertLowPrecision(DType from, const void* src, DType to, void* dst, int64_t n);

}  // namespace tensord::cpu
