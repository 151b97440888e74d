// Gradient checks (f64 finite differences) for every differentiable elementwise op, with
// broadcasting, plus exact checks of PyTorch's conventions at ties, kinks and boundaries and
// of the zero gradient of rounding ops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/autodiff/elementwise_grad_util.h"

namespace tensord {
namespace {
using namespace testing;

Tensor X(Shape shape, uint32_t seed, double lo = -1, double hi = 1) {
  return Random(DType::kF64, std::move(shape), seed, lo, hi);
}

struct BinaryGradCase {
  std::string op;
  AttrMap attrs;
  double a_lo, a_hi, b_lo, b_hi;
};

TEST(ElementwiseGrad, BinaryOpsWithBroadcasting) {
  const std::vector<BinaryGradCase> cases = {
      {"add", {}, -1, 1, -1, 1},      {"add", {{"alpha", 2.5}}, -1, 1, -1, 1},
      {"sub", {}, -1, 1, -1, 1},      {"sub", {{"alpha", -0.5}}, -1, 1, -1, 1},
      {"mul", {}, -1, 1, -1, 1},      {"div", {}, -1, 1, 0.5, 2},
      {"pow", {}, 0.5, 2, -1.5, 1.5}, {"maximum", {}, -1, 1, -1, 1},
      {"minimum", {}, -1, 1, -1, 1},
  };
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {1, 4}}, {{}, {2, 3}}, {{3, 1, 2}, {2}}};
  uint32_t seed = 1;
  for (const BinaryGradCase& c : cases) {
    for (const auto& [sa, sb] : shapes) {
      Tensor a = X(sa, ++seed, c.a_lo, c.a_hi);
      Tensor b = X(sb, ++seed, c.b_lo, c.b_hi);
      EXPECT_TRUE(GradCheck(c.op, {a, b}, c.attrs))
          << c.op << " " << ShapeToString(sa) << " with " << ShapeToString(sb);
    }
  }
}

TEST(ElementwiseGrad, WrappedScalarAndIntegerOperandsGetNoGradient) {
  GradCheckOptions first;
  first.wrt = {0};
  Tensor x = X({2, 3}, 40, 0.5, 2);
  EXPECT_TRUE(GradCheck("mul", {x, ScalarOperand(1.5)}, {}, first));
  EXPECT_TRUE(GradCheck("pow", {x, ScalarOperand(2.0)}, {}, first));
  EXPECT_TRUE(GradCheck("pow", {x, ScalarOperand(-0.5)}, {}, first));
  EXPECT_TRUE(GradCheck("div", {x, Values(DType::kI32, {3}, {1, -2, 3})}, {}, first));
  GradCheckOptions second;
  second.wrt = {1};
  EXPECT_TRUE(GradCheck("pow", {ScalarOperand(1.7), x}, {}, second));
  EXPECT_TRUE(GradCheck("sub", {ScalarOperand(1.0), x}, {}, second));
  // Mixed float dtypes: the f32 input's gradient comes back as f32.
  std::vector<Tensor> g =
      Gradients("mul", {Random(DType::kF32, {2}, 41), Values(DType::kF64, {2}, {2, 3})});
  ASSERT_TRUE(g[0].defined());
  EXPECT_EQ(g[0].dtype(), DType::kF32);
  EXPECT_TRUE(AllClose(g[0], {2, 3}));
}

TEST(ElementwiseGrad, Where) {
  Tensor cond = Random(DType::kBool, {2, 3}, 50);
  EXPECT_TRUE(GradCheck("where", {cond, X({2, 3}, 51), X({2, 3}, 52)}));
  EXPECT_TRUE(GradCheck("where", {Random(DType::kBool, {2, 1}, 53), X({3}, 54), X({2, 3}, 55)}));
  EXPECT_TRUE(GradCheck("where", {cond, X({}, 56), X({2, 1}, 57)}));
  std::vector<Tensor> g =
      Gradients("where", {Values(DType::kBool, {3}, {1, 0, 1}), X({3}, 58), X({3}, 59)});
  EXPECT_FALSE(g[0].defined());
  EXPECT_TRUE(AllClose(g[1], {1, 0, 1}));
  EXPECT_TRUE(AllClose(g[2], {0, 1, 0}));
}

TEST(ElementwiseGrad, UnaryOps) {
  const Shape s = {2, 3};
  EXPECT_TRUE(GradCheck("neg", {X(s, 60)}));
  EXPECT_TRUE(GradCheck("abs", {AwayFromZero(s, 61)}));
  EXPECT_TRUE(GradCheck("square", {X(s, 62)}));
  EXPECT_TRUE(GradCheck("exp", {X(s, 63)}));
  EXPECT_TRUE(GradCheck("log", {X(s, 64, 0.2, 3)}));
  EXPECT_TRUE(GradCheck("sqrt", {X(s, 65, 0.2, 3)}));
  EXPECT_TRUE(GradCheck("rsqrt", {X(s, 66, 0.2, 3)}));
  EXPECT_TRUE(GradCheck("reciprocal", {AwayFromZero(s, 67, 0.3)}));
  EXPECT_TRUE(GradCheck("frac", {AwayFromIntegers(s, 68)}));
  EXPECT_TRUE(GradCheck("clamp", {X(s, 69)}, {{"min", -0.5}, {"max", 0.5}}));
  EXPECT_TRUE(GradCheck("clamp", {X(s, 70)}, {{"min", 0.1}}));
  EXPECT_TRUE(GradCheck("clamp", {X(s, 71)}, {{"max", -0.2}}));
  // 0-d and empty inputs.
  EXPECT_TRUE(GradCheck("exp", {X({}, 72)}));
  EXPECT_TRUE(GradCheck("square", {X({0, 3}, 73)}));
}

TEST(ElementwiseGrad, RoundingOpsHaveZeroGradient) {
  const Tensor x = AwayFromIntegers({2, 3}, 80);
  for (const char* op : {"sign", "floor", "ceil", "round", "trunc"}) {
    EXPECT_TRUE(GradCheck(op, {AwayFromZero({2, 3}, 81)})) << op;
    std::vector<Tensor> g = Gradients(op, {x});
    ASSERT_TRUE(g[0].defined()) << op;
    EXPECT_EQ(g[0].shape(), x.shape());
    EXPECT_TRUE(AllClose(g[0], std::vector<double>(6, 0.0))) << op;
  }
  // Rounded division is piecewise constant too.
  std::vector<Tensor> g =
      Gradients("div", {X({3}, 82), X({3}, 83, 0.5, 2)}, {{"rounding_mode", std::string("floor")}});
  EXPECT_TRUE(AllClose(g[0], {0, 0, 0}));
  EXPECT_TRUE(AllClose(g[1], {0, 0, 0}));
}

TEST(ElementwiseGrad, PyTorchConventionsAtSpecialPoints) {
  // |x|' = sign(x): 0 at 0.
  EXPECT_TRUE(AllClose(Gradients("abs", {Values(DType::kF64, {3}, {-2, 0, 3})})[0], {-1, 0, 1}));
  // Ties split the gradient evenly between maximum's (and minimum's) operands.
  const Tensor a = Values(DType::kF64, {3}, {1, 2, 3});
  const Tensor b = Values(DType::kF64, {3}, {1, 0, 5});
  std::vector<Tensor> gmax = Gradients("maximum", {a, b});
  EXPECT_TRUE(AllClose(gmax[0], {0.5, 1, 0}));
  EXPECT_TRUE(AllClose(gmax[1], {0.5, 0, 1}));
  std::vector<Tensor> gmin = Gradients("minimum", {a, b});
  EXPECT_TRUE(AllClose(gmin[0], {0.5, 0, 1}));
  EXPECT_TRUE(AllClose(gmin[1], {0.5, 1, 0}));
  // clamp passes the gradient on the boundaries themselves (min <= x <= max).
  EXPECT_TRUE(AllClose(Gradients("clamp", {Values(DType::kF64, {5}, {-2, -1, 0, 1, 2})},
                                 {{"min", -1.0}, {"max", 1.0}})[0],
                       {0, 1, 1, 1, 0}));
  // pow: the base gradient is 0 where the exponent is 0 (even at base 0); the exponent
  // gradient is 0 where base == 0 and exponent >= 0, else x^e * log(x).
  std::vector<Tensor> gp = Gradients(
      "pow", {Values(DType::kF64, {4}, {0, 0, 2, 0}), Values(DType::kF64, {4}, {0, 2, 3, -1})});
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(AllClose(gp[0], {0, 0, 12, -inf}));
  EXPECT_TRUE(AllClose(gp[1], {0, 0, 8 * std::log(2.0), -inf}));
  // sqrt and log of negatives are NaN, and so are their gradients.
  EXPECT_TRUE(AllClose(Gradients("log", {Values(DType::kF64, {2}, {-1, 2})})[0], {-1, 0.5}));
  EXPECT_TRUE(std::isnan(Gradients("sqrt", {Values(DType::kF64, {1}, {-1})})[0].ToDoubles()[0]));
}

TEST(ElementwiseGrad, BalancedCheckpointingRecomputes) {
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  EXPECT_TRUE(GradCheck("exp", {X({2, 3}, 90)}, {}, balanced));
  EXPECT_TRUE(GradCheck("div", {X({2, 3}, 91), X({3}, 92, 0.5, 2)}, {}, balanced));
  EXPECT_TRUE(GradCheck("pow", {X({2, 3}, 93, 0.5, 2), X({2, 1}, 94)}, {}, balanced));
  EXPECT_TRUE(GradCheck("rsqrt", {X({2, 3}, 95, 0.5, 2)}, {}, balanced));
  EXPECT_TRUE(GradCheck("where", {Random(DType::kBool, {2, 3}, 96), X({2, 3}, 97), X({3}, 98)}, {},
                        balanced));
}

}  // namespace
}  // namespace tensord
