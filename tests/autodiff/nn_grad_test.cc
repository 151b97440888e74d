// Finite-difference gradient checks (f64) of the linear-algebra and neural-network ops, plus
// chains under BALANCED checkpointing, where memory-bound ops are recomputed during backward.
#include <gtest/gtest.h>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

constexpr DType kF64 = DType::kF64;
using Ints = std::vector<int64_t>;

GradCheckOptions Balanced() {
  GradCheckOptions o;
  o.checkpointing = Checkpointing::kBalanced;
  return o;
}

TEST(LinalgGrad, Matmul) {
  const std::vector<std::pair<Shape, Shape>> cases = {{{3}, {3}},
                                                      {{3}, {3, 4}},
                                                      {{2, 3}, {3}},
                                                      {{2, 3}, {3, 4}},
                                                      {{2, 2, 3}, {3, 4}},
                                                      {{2, 3}, {2, 3, 4}},
                                                      {{2, 1, 2, 3}, {3, 3, 2}},
                                                      {{3}, {2, 3, 2}},
                                                      {{2, 2, 3}, {3}}};
  uint32_t seed = 1;
  for (const auto& [sa, sb] : cases) {
    Tensor a = Random(kF64, sa, seed++), b = Random(kF64, sb, seed++);
    EXPECT_TRUE(GradCheck("matmul", {a, b})) << ShapeToString(sa) << " @ " << ShapeToString(sb);
  }
}

TEST(LinalgGrad, MmBmmLinear) {
  EXPECT_TRUE(GradCheck("mm", {Random(kF64, {3, 4}, 1), Random(kF64, {4, 2}, 2)}));
  EXPECT_TRUE(GradCheck("bmm", {Random(kF64, {2, 3, 4}, 3), Random(kF64, {2, 4, 2}, 4)}));
  Tensor w = Random(kF64, {3, 4}, 5), b = Random(kF64, {3}, 6);
  EXPECT_TRUE(GradCheck("linear", {Random(kF64, {2, 4}, 7), w, b}));
  EXPECT_TRUE(GradCheck("linear", {Random(kF64, {2, 2, 4}, 8), w, b}));
  EXPECT_TRUE(GradCheck("linear", {Random(kF64, {4}, 9), w}));
  EXPECT_TRUE(GradCheck("linear", {Random(kF64, {2, 4}, 10), Random(kF64, {4}, 11)}));
  EXPECT_TRUE(GradCheck("linear", {Random(kF64, {2, 4}, 12), w, Random(kF64, {1}, 13)}));
}

}  // namespace
}  // namespace tensord
