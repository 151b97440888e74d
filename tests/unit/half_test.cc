// The bf16/f16 conversions of server/core/half.h, checked exhaustively over every 16-bit
// pattern and against independent references for float → 2 bytes (rounding by exact double
// arithmetic rather than by bit tricks).
#include "common/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "server/core/dtype.h"

namespace tensord {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Usable in constant expressions.
static_assert(FloatToBF16(1.0f) == 0x3f80);
static_assert(BF16ToFloat(0xc000) == -2.0f);
static_assert(FloatToHalf(1.0f) == 0x3c00);
static_assert(HalfToFloat(0x7bff) == 65504.0f);
static_assert(FloatToHalf(65520.0f) == 0x7c00);  // the midpoint above 65504 rounds to inf

// f16 value of a bit pattern computed from the definition, in double.
double HalfReference(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  if (exp == 0x1f) {
    return mant ? std::numeric_limits<double>::quiet_NaN()
                : sign * std::numeric_limits<double>::infinity();
  }
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

TEST(Half, EveryHalfPatternDecodesToItsValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    const double want = HalfReference(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), want) << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
    }
  }
}

TEST(Half, EveryHalfPatternRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t back = FloatToHalf(HalfToFloat(static_cast<uint16_t>(h)));
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
      // NaN stays NaN with its sign and payload, made quiet.
      ASSERT_EQ(back, h | 0x200) << h;
    } else {
      ASSERT_EQ(back, h) << h;
    }
  }
}

TEST(Half, EveryBF16PatternRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = BF16ToFloat(static_cast<uint16_t>(b));
    ASSERT_EQ(Bits(f), b << 16) << b;  // the upper half of a float, exactly
    const uint16_t back = FloatToBF16(f);
    if ((b & 0x7f80) == 0x7f80 && (b & 0x7f)) {
      ASSERT_EQ(back, b | 0x40) << b;  // quiet NaN, sign and payload kept
    } else {
      ASSERT_EQ(back, b) << b;
    }
  }
}

// Nearest-even rounding of `x` onto the sorted finite values of a format, by exhaustive
// comparison in double: the reference the bit-level conversions must agree with.
template <typename Decode>
uint16_t RoundReference(float x, Decode decode, double overflow_at, uint16_t inf_bits) {
  const double v = x;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::fabs(v) >= overflow_at) return sign | inf_bits;
  // Binary search over the positive finite patterns (monotonic in their bits).
  uint16_t lo = 0, hi = inf_bits;  // decode(hi) = inf > |v|
  while (hi - lo > 1) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    if (decode(mid) <= std::fabs(v)) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const double dl = std::fabs(v) - decode(lo), dh = decode(hi) - std::fabs(v);
  uint16_t pick = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
  return sign | pick;
}

TEST(Half, FloatToHalfRoundsToNearestEven) {
  auto decode = [](uint16_t h) { return static_cast<double>(HalfToFloat(h)); };
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> bits;
  int checked = 0;
  // Every float in and around the f16 range whose low 13 bits sit at a rounding boundary,
  // plus random floats of every magnitude.
  for (uint32_t e = 90; e < 160; ++e) {
    for (uint32_t m : {0u, 1u, 0xfffu, 0x1000u, 0x1001u, 0x2000u, 0x3000u, 0x7fffffu, 0x400000u,
                       0x401000u, 0x7ff000u, 0x7fefffu}) {
      for (uint32_t s : {0u, 0x80000000u}) {
        const float x = FromBits(s | (e << 23) | m);
        ASSERT_EQ(FloatToHalf(x), RoundReference(x, decode, 65520.0, 0x7c00)) << x;
        ++checked;
      }
    }
  }
  for (int i = 0; i < 200000; ++i) {
    const float x = FromBits(bits(gen));
    if (std::isnan(x)) continue;
    ASSERT_EQ(FloatToHalf(x), RoundReference(x, decode, 65520.0, 0x7c00)) << x;
    ++checked;
  }
  EXPECT_GT(checked, 100000);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0);       // tie between 0 and 2^-24: even
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);  // above the tie
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
}

TEST(Half, FloatToBF16RoundsToNearestEven) {
  auto decode = [](uint16_t b) { return static_cast<double>(BF16ToFloat(b)); };
  // Largest bf16 is 0x7f7f; values at or above the midpoint to 2^128 round to infinity.
  const double overflow_at = (static_cast<double>(BF16ToFloat(0x7f7f)) + std::ldexp(1.0, 128)) / 2;
  std::mt19937 gen(11);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(gen);
    if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u;  // exact ties
    const float x = FromBits(u);
    if (std::isnan(x)) continue;
    ASSERT_EQ(FloatToBF16(x), RoundReference(x, decode, overflow_at, 0x7f80)) << x;
  }
  EXPECT_EQ(FloatToBF16(FromBits(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(FloatToBF16(FromBits(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(FloatToBF16(FromBits(0x7f7fffffu)), 0x7f80);  // max float rounds to inf
  // A NaN whose payload is only in the low half must stay NaN (truncation would give inf).
  EXPECT_EQ(FloatToBF16(FromBits(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(FloatToBF16(FromBits(0xff800001u)), 0xffc0);
}

TEST(Half, DTypeTable) {
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeName(DType::kBF16), "bf16");
  EXPECT_EQ(DTypeName(DType::kF16), "f16");
  for (const char* name : {"bf16", "bfloat16"}) EXPECT_EQ(*ParseDType(name), DType::kBF16);
  for (const char* name : {"f16", "float16", "half"}) EXPECT_EQ(*ParseDType(name), DType::kF16);
  EXPECT_TRUE(IsFloat(DType::kBF16));
  EXPECT_TRUE(IsFloat(DType::kF16));
  EXPECT_TRUE(IsLowPrecision(DType::kF16));
  EXPECT_FALSE(IsLowPrecision(DType::kF32));
  EXPECT_FALSE(kFloat.Contains(DType::kBF16));  // compute dtypes only
  EXPECT_TRUE(WithStorageDTypes(kFloat).Contains(DType::kF16));
  EXPECT_FALSE(WithStorageDTypes(kInt).Contains(DType::kBF16));
  EXPECT_EQ(WithStorageDTypes(kFloat).ToString(), "f32,f64,bf16,f16");
}

TEST(Half, PromotionMatchesTorch) {
  const DType bf = DType::kBF16, h = DType::kF16;
  EXPECT_EQ(PromoteTypes(bf, h), DType::kF32);
  EXPECT_EQ(PromoteTypes(h, bf), DType::kF32);
  EXPECT_EQ(PromoteTypes(bf, bf), bf);
  EXPECT_EQ(PromoteTypes(bf, DType::kF32), DType::kF32);
  EXPECT_EQ(PromoteTypes(DType::kF64, h), DType::kF64);
  EXPECT_EQ(PromoteTypes(bf, DType::kI64), bf);
  EXPECT_EQ(PromoteTypes(DType::kBool, h), h);
}

}  // namespace
}  // namespace tensord
