// Conversions between float and the two 2-byte storage formats: bfloat16 (the top half of an
// IEEE binary32) and IEEE binary16. Both round to nearest, ties to even, as PyTorch's c10
// types and the hardware conversions (VCVTNEPS2BF16, VCVTPS2PH) do, so values computed here
// match values computed by oneDNN's bf16 kernels and by torch on the same float.
//
// constexpr so that tables and tests can evaluate them at compile time; the compiler turns the
// integer arithmetic into a handful of instructions at run time.
#pragma once

#include <cstdint>

namespace tensord {

namespace half_internal {

constexpr uint32_t FloatBits(float f) { return __builtin_bit_cast(uint32_t, f); }
constexpr float BitsFloat(uint32_t u) { return __builtin_bit_cast(float, u); }

}  // namespace half_internal

// bfloat16: sign, 8 exponent bits, 7 mantissa bits. Every bf16 value is exactly a float.
constexpr float BF16ToFloat(uint16_t bits) {
  return half_internal::BitsFloat(static_cast<uint32_t>(bits) << 16);
}

constexpr uint16_t FloatToBF16(float f) {
  const uint32_t u = half_internal::FloatBits(f);
  // A NaN keeps its sign and top payload bits and is made quiet, so truncation never turns a
  // NaN whose payload lives in the low half into an infinity.
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  // Round to nearest even on the 16 discarded bits; a carry out of the mantissa bumps the
  // exponent, which is the correct rounding up to the next binade (or to infinity).
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

// IEEE binary16: sign, 5 exponent bits (bias 15), 10 mantissa bits; subnormals down to 2^-24,
// largest finite 65504.
constexpr float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return half_internal::BitsFloat(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return half_internal::BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return half_internal::BitsFloat(sign);
  // Subnormal: normalise into a float exponent (mant * 2^-24).
  uint32_t e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return half_internal::BitsFloat(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

constexpr uint16_t FloatToHalf(float f) {
  const uint32_t u = half_internal::FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) {  // NaN: quiet, top payload bits kept
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  // 65520 is the midpoint between 65504 and 2^16; ties go to the even 2^16, i.e. infinity.
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a >= 0x38800000u) {  // normal half (>= 2^-14)
    // Rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
    const uint32_t rebased = a - (112u << 23);
    const uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }
  // Subnormal half: the value in units of 2^-24 is mant >> shift, rounded to nearest even.
  const uint32_t exp = a >> 23;
  const uint32_t shift = 126u - exp;  // >= 14 here
  if (shift > 24) return sign;        // below 2^-25: rounds to zero
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;  // may carry into the smallest normal
  return static_cast<uint16_t>(sign | q);
}

}  // namespace tensord
