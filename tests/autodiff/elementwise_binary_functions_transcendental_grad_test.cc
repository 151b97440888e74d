// Gradient checks (f64 finite differences) for remainder, fmod, atan2, hypot, lerp and the unary
// transcendental ops (log1p ... erfinv), with broadcasting and inputs away from each op's jumps
// and domain edges, plus exact gradients where finite differences cannot look.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/autodiff/elementwise_grad_util.h"
#include "tests/unit/elementwise_test_util.h"

namespace tensord {
namespace {
using namespace testing;

Tensor X(Shape shape, uint32_t seed, double lo = -1, double hi = 1) {
  return Random(DType::kF64, std::move(shape), seed, lo, hi);
}

// A dividend whose quotient by the (broadcast) divisor has a fractional part in [0.2, 0.8]:
// away from the jumps of remainder and fmod. `a_shape` must be the broadcast shape.
Tensor DividendFor(const Tensor& b, const Shape& a_shape, uint32_t seed) {
  Tensor q = AwayFromIntegers(a_shape, seed);
  return Values(
      DType::kF64, a_shape,
      BroadcastRef({q, b}, a_shape, [](const std::vector<double>& v) { return v[0] * v[1]; }));
}

TEST(ElementwiseFunctionGrad, RemainderAndFmod) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 3}, {}}, {{2, 3}, {2, 1}}, {{}, {}}};
  uint32_t seed = 1;
  for (const char* op : {"remainder", "fmod"}) {
    for (const auto& [sa, sb] : shapes) {
      Tensor b = AwayFromZero(sb, ++seed, 0.5);
      Tensor a = DividendFor(b, sa, ++seed);
      EXPECT_TRUE(GradCheck(op, {a, b}))
          << op << " " << ShapeToString(sa) << " by " << ShapeToString(sb);
    }
    // A wrapped-scalar divisor, and an integer one: only the float dividend has a gradient.
    Tensor a = DividendFor(Values(DType::kF64, {}, {1.5}), {2, 3}, ++seed);
    GradCheckOptions first;
    first.wrt = {0};
    EXPECT_TRUE(GradCheck(op, {a, ScalarOperand(1.5)}, {}, first)) << op;
    Tensor ai = DividendFor(Values(DType::kF64, {}, {3}), {2, 3}, ++seed);
    EXPECT_TRUE(GradCheck(op, {ai, Values(DType::kI64, {3}, {3, 3, 3})}, {}, first)) << op;
  }
  // d/db = -floor(a / b) for remainder, -trunc(a / b) for fmod.
  const Tensor a = Values(DType::kF64, {2}, {-7.5, 7.5});
  const Tensor b = Values(DType::kF64, {2}, {2, 2});
  std::vector<Tensor> gr = Gradients("remainder", {a, b});
  EXPECT_TRUE(AllClose(gr[0], {1, 1}));
  EXPECT_TRUE(AllClose(gr[1], {4, -3}));
  std::vector<Tensor> gf = Gradients("fmod", {a, b});
  EXPECT_TRUE(AllClose(gf[1], {3, -3}));
}

TEST(ElementwiseFunctionGrad, Atan2AndHypot) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {1, 4}}, {{}, {2, 3}}, {{3, 1, 2}, {2}}};
  uint32_t seed = 20;
  for (const auto& [sa, sb] : shapes) {
    // atan2 jumps across the negative x axis (a == 0, b < 0): keep a away from 0.
    EXPECT_TRUE(GradCheck("atan2", {AwayFromZero(sa, ++seed, 0.2), X(sb, ++seed)}))
        << ShapeToString(sa) << " with " << ShapeToString(sb);
    EXPECT_TRUE(GradCheck("hypot", {AwayFromZero(sa, ++seed, 0.2), X(sb, ++seed)}))
        << ShapeToString(sa) << " with " << ShapeToString(sb);
  }
  GradCheckOptions second;
  second.wrt = {1};
  EXPECT_TRUE(GradCheck("atan2", {ScalarOperand(0.7), X({2, 3}, ++seed)}, {}, second));
  // hypot's gradient at the origin is NaN (0 / 0), as in PyTorch.
  std::vector<Tensor> g =
      Gradients("hypot", {Values(DType::kF64, {2}, {0, 3}), Values(DType::kF64, {2}, {0, 4})});
  EXPECT_TRUE(AllClose(g[0], {std::nan(""), 0.6}));
  EXPECT_TRUE(AllClose(g[1], {std::nan(""), 0.8}));
}

TEST(ElementwiseFunctionGrad, Lerp) {
  const std::vector<std::vector<Shape>> shapes = {
      {{2, 3}, {2, 3}, {2, 3}}, {{2, 1}, {1, 3}, {}}, {{3}, {2, 3}, {2, 1}}, {{}, {}, {}}};
  uint32_t seed = 40;
  for (const auto& s : shapes) {
    // Weights on both sides of 0.5, where the forward formula switches.
    EXPECT_TRUE(GradCheck("lerp", {X(s[0], ++seed), X(s[1], ++seed), X(s[2], ++seed, -0.5, 1.5)}))
        << ShapeToString(s[0]) << " " << ShapeToString(s[1]) << " " << ShapeToString(s[2]);
  }
  GradCheckOptions two;
  two.wrt = {0, 1};
  EXPECT_TRUE(GradCheck("lerp", {X({2, 3}, ++seed), X({3}, ++seed), ScalarOperand(0.3)}, {}, two));
  // A 0-d f32 weight next to f64 tensors: its gradient is summed to 0-d and comes back f32.
  std::vector<Tensor> g =
      Gradients("lerp", {Values(DType::kF64, {2}, {1, 2}), Values(DType::kF64, {2}, {4, 7}),
                         Values(DType::kF32, {}, {0.25})});
  EXPECT_TRUE(AllClose(g[0], {0.75, 0.75}));
  EXPECT_TRUE(AllClose(g[1], {0.25, 0.25}));
  ASSERT_TRUE(g[2].defined());
  EXPECT_EQ(g[2].dtype(), DType::kF32);
  EXPECT_EQ(g[2].shape(), Shape{});
  EXPECT_TRUE(AllClose(g[2], {8}));
}

struct UnaryGradCase {
  std::string op;
  double lo, hi;  // inside the domain, away from its edges
};

TEST(ElementwiseFunctionGrad, UnaryOps) {
  const std::vector<UnaryGradCase> cases = {
      {"log1p", -0.8, 3},  {"expm1", -2, 2},    {"log2", 0.2, 4},      {"log10", 0.2, 4},
      {"exp2", -2, 2},     {"sin", -3, 3},      {"cos", -3, 3},        {"tan", -1.2, 1.2},
      {"asin", -0.9, 0.9}, {"acos", -0.9, 0.9}, {"atan", -3, 3},       {"sinh", -2, 2},
      {"cosh", -2, 2},     {"asinh", -3, 3},    {"acosh", 1.2, 4},     {"atanh", -0.9, 0.9},
      {"erf", -2, 2},      {"erfc", -2, 2},     {"erfinv", -0.9, 0.9},
  };
  uint32_t seed = 60;
  for (const UnaryGradCase& c : cases) {
    EXPECT_TRUE(GradCheck(c.op, {X({2, 3}, ++seed, c.lo, c.hi)})) << c.op;
    EXPECT_TRUE(GradCheck(c.op, {X({}, ++seed, c.lo, c.hi)})) << c.op << " 0-d";
    EXPECT_TRUE(GradCheck(c.op, {X({0, 2}, ++seed, c.lo, c.hi)})) << c.op << " empty";
  }
  // Exact values: erfinv'(0) = sqrt(pi)/2, erf'(0) = 2/sqrt(pi), atanh'(±1) = inf.
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(
      AllClose(Gradients("erfinv", {Values(DType::kF64, {1}, {0})})[0], {std::sqrt(M_PI) / 2}));
  EXPECT_TRUE(
      AllClose(Gradients("erf", {Values(DType::kF64, {1}, {0})})[0], {2 / std::sqrt(M_PI)}));
  EXPECT_TRUE(AllClose(Gradients("atanh", {Values(DType::kF64, {2}, {1, -1})})[0], {inf, inf}));
  // An f32 input gets an f32 gradient.
  std::vector<Tensor> g = Gradients("sin", {Values(DType::kF32, {2}, {0, 1})});
  EXPECT_EQ(g[0].dtype(), DType::kF32);
  EXPECT_TRUE(AllClose(g[0], {1, std::cos(1.0)}));
}

TEST(ElementwiseFunctionGrad, BalancedCheckpointingRecomputes) {
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  Tensor b = AwayFromZero({3}, 80, 0.5);
  EXPECT_TRUE(GradCheck("remainder", {DividendFor(b, {2, 3}, 81), b}, {}, balanced));
  EXPECT_TRUE(GradCheck("hypot", {X({2, 3}, 82, 0.2, 1), X({3}, 83)}, {}, balanced));
  EXPECT_TRUE(GradCheck("lerp", {X({2, 3}, 84), X({2, 3}, 85), X({3}, 86)}, {}, balanced));
  EXPECT_TRUE(GradCheck("tan", {X({2, 3}, 87)}, {}, balanced));
  EXPECT_TRUE(GradCheck("erfinv", {X({2, 3}, 88, -0.9, 0.9)}, {}, balanced));
  EXPECT_TRUE(GradCheck("expm1", {X({2, 3}, 89)}, {}, balanced));
}

}  // namespace
}  // namespace tensord
