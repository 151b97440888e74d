// The f32 math of server/backends/cpu/vector_math.h: within 1 ulp of the correctly rounded
// value over a dense sample of every float, the special values as libm gives them, and a run
// computed at once equal, bit for bit, to its values computed one at a time, at every length
// and offset (so that fused and unfused kernels agree).
#include "server/backends/cpu/vector_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace tensord {
namespace {

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Distance in representable floats (both finite or both the same infinity).
int64_t Ulps(float a, float b) {
  auto ordered = [](float x) {
    const int64_t i = static_cast<int32_t>(Bits(x));
    return i < 0 ? std::numeric_limits<int32_t>::min() - i : i;
  };
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

TEST(VectorMath, TanhIsWithinOneUlpOfTheRoundedValue) {
  int64_t worst = 0;
  float worst_at = 0;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 997) {
    float x;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&x, &b, sizeof x);
    if (std::isnan(x)) continue;
    const float expected = static_cast<float>(std::tanh(static_cast<double>(x)));
    const int64_t ulps = Ulps(cpu::vmath::Tanh(x), expected);
    if (ulps > worst) {
      worst = ulps;
      worst_at = x;
    }
  }
  EXPECT_LE(worst, 1) << "at " << worst_at;
}

TEST(VectorMath, TanhOfSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(cpu::vmath::Tanh(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(cpu::vmath::Tanh(inf), 1.0f);
  EXPECT_EQ(cpu::vmath::Tanh(-inf), -1.0f);
  EXPECT_EQ(Bits(cpu::vmath::Tanh(-0.0f)), Bits(-0.0f));
  EXPECT_EQ(Bits(cpu::vmath::Tanh(0.0f)), Bits(0.0f));
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(cpu::vmath::Tanh(tiny), tiny);
  EXPECT_EQ(cpu::vmath::Tanh(100.0f), 1.0f);
}

TEST(VectorMath, ARunIsItsValuesOneAtATime) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {0.5f,   -3.0f, std::numeric_limits<float>::quiet_NaN(),
                               inf,    -inf,  1e-30f,
                               -0.0f,  9.5f,  0.0001f,
                               -20.0f, 0.7f,  1e-42f};
  for (int i = 0; i < 40; ++i) values.push_back(std::sin(i * 1.3f) * (i % 7));
  for (size_t offset = 0; offset < 5; ++offset) {
    for (size_t n = 0; offset + n <= values.size(); n += (n < 10 ? 1 : 7)) {
      std::vector<float> out(n, 42.0f);
      cpu::vmath::Tanh(values.data() + offset, out.data(), static_cast<int64_t>(n));
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(Bits(out[i]), Bits(cpu::vmath::Tanh(values[offset + i])))
            << "offset " << offset << " length " << n << " value " << values[offset + i];
      }
    }
  }
}

}  // namespace
}  // namespace tensord
