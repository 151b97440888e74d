#include "server/backends/cpu/low_precision_cast.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common/half.h"

namespace tensord::cpu {
namespace {

// Elements per pass through the float staging buffer (stays in L1).
constexpr int64_t kBlock = 1024;

void ToFloats(DType from, const void* src, float* out, int64_t n) {
  if (from == DType::kBF16 || from == DType::kF16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    if (from == DType::kBF16) {
      for (int64_t i = 0; i < n; ++i) out[i] = BF16ToFloat(s[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = HalfToFloat(s[i]);
    }
    return;
  }
  TENSORD_DISPATCH_TYPED(from, [&] {
    const T* s = static_cast<const T*>(src);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(s[i]);
  });
}

void FromFloats(const float* in, DType to, void* dst, int64_t n) {
  if (to == DType::kBF16 || to == DType::kF16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    if (to == DType::kBF16) {
      for (int64_t i = 0; i < n; ++i) d[i] = FloatToBF16(in[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = FloatToHalf(in[i]);
    }
    return;
  }
  TENSORD_DISPATCH_TYPED(to, [&] {
    T* d = static_cast<T*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = ConvertElement<T>(in[i]);
  });
}

}  // namespace

void ConvertLowPrecision(DType from, const void* src, DType to, void* dst, int64_t n) {
  const size_t in_size = DTypeSize(from), out_size = DTypeSize(to);
  if (from == to) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * in_size);
    return;
  }
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  float buf[kBlock];
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t len = std::min(kBlock, n - start);
    ToFloats(from, s + start * in_size, buf, len);
    FromFloats(buf, to, d + start * out_size, len);
  }
}

}  // namespace tensord::cpu
