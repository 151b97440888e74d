// Gradient checks (f64 finite differences) for relu6, selu, celu, mish, softsign, hardsigmoid,
// hardswish, hardtanh, logsigmoid, tanhshrink, softshrink, hardshrink, threshold, prelu, glu and
// softmin with inputs away from their kinks, and exact gradients at the kinks themselves, where
// PyTorch's convention decides.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/autodiff/elementwise_grad_util.h"

namespace tensord {
namespace {
using namespace testing;

constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

Tensor X(Shape shape, uint32_t seed, double lo = -2, double hi = 2) {
  return Random(DType::kF64, std::move(shape), seed, lo, hi);
}

// Random f64 values in [lo, hi) at least `gap` away from every point in `kinks`.
Tensor AwayFrom(Shape shape, uint32_t seed, double lo, double hi, std::vector<double> kinks,
                double gap = 0.1) {
  std::vector<double> v = Random(DType::kF64, shape, seed, lo, hi).ToDoubles();
  for (double& x : v) {
    for (double k : kinks) {
      if (std::fabs(x - k) < gap) x = k + (x < k ? -gap : gap);
    }
  }
  return Values(DType::kF64, std::move(shape), v);
}

struct GradCase {
  std::string op;
  AttrMap attrs;
  double lo, hi;
  std::vector<double> kinks;
};

TEST(HardShrinkGluActivationGrad, Pointwise) {
  const std::vector<GradCase> cases = {
      {"relu6", {}, -2, 8, {0, 6}},
      {"selu", {}, -3, 3, {0}},
      {"celu", {}, -3, 3, {}},
      {"celu", {{"alpha", 0.5}}, -3, 3, {}},
      {"mish", {}, -4, 4, {}},
      {"softsign", {}, -3, 3, {}},
      {"hardsigmoid", {}, -5, 5, {-3, 3}},
      {"hardswish", {}, -5, 5, {-3, 3}},
      {"hardtanh", {}, -2, 2, {-1, 1}},
      {"hardtanh", {{"min_val", -0.5}, {"max_val", 1.5}}, -2, 2, {-0.5, 1.5}},
      {"logsigmoid", {}, -4, 4, {}},
      {"tanhshrink", {}, -3, 3, {}},
      {"softshrink", {}, -2, 2, {-0.5, 0.5}},
      {"softshrink", {{"lambd", 1.0}}, -2, 2, {-1, 1}},
      {"hardshrink", {}, -2, 2, {-0.5, 0.5}},
      {"threshold", {{"threshold", 0.3}, {"value", -1.0}}, -2, 2, {0.3}},
  };
  uint32_t seed = 1;
  for (const GradCase& c : cases) {
    EXPECT_TRUE(GradCheck(c.op, {AwayFrom({3, 4}, ++seed, c.lo, c.hi, c.kinks)}, c.attrs)) << c.op;
    EXPECT_TRUE(GradCheck(c.op, {AwayFrom({}, ++seed, c.lo, c.hi, c.kinks)}, c.attrs)) << c.op;
    EXPECT_TRUE(GradCheck(c.op, {X({0, 2}, ++seed)}, c.attrs)) << c.op;
  }
}

TEST(HardShrinkGluActivationGrad, ConventionsAtKinks) {
  auto grad = [](const std::string& op, const std::vector<double>& x, const AttrMap& attrs = {}) {
    return Gradients(op, {Values(DType::kF64, {static_cast<int64_t>(x.size())}, x)}, attrs)[0];
  };
  // hardtanh and relu6 pass nothing on the bounds themselves.
  EXPECT_TRUE(AllClose(grad("relu6", {-1, 0, 3, 6, 7}), {0, 0, 1, 0, 0}));
  EXPECT_TRUE(AllClose(grad("hardtanh", {-2, -1, 0, 1, 2}), {0, 0, 1, 0, 0}));
  // hardsigmoid: 1/6 strictly inside (-3, 3); hardswish follows PyTorch's formula, so its
  // bounds get x / 3 + 0.5.
  EXPECT_TRUE(AllClose(grad("hardsigmoid", {-4, -3, 0, 3, 4}), {0, 0, 1.0 / 6, 0, 0}));
  EXPECT_TRUE(AllClose(grad("hardswish", {-4, -3, 0, 3, 4}), {0, -0.5, 0.5, 1.5, 1}));
  // The shrinks are flat on [-lambd, lambd], bounds included; threshold at the threshold.
  EXPECT_TRUE(AllClose(grad("softshrink", {-1, -0.5, 0, 0.5, 1}), {1, 0, 0, 0, 1}));
  EXPECT_TRUE(AllClose(grad("hardshrink", {-1, -0.5, 0, 0.5, 1}), {1, 0, 0, 0, 1}));
  EXPECT_TRUE(
      AllClose(grad("threshold", {0, 1, 2}, {{"threshold", 1.0}, {"value", 5.0}}), {0, 0, 1}));
  // selu and celu take their x <= 0 branch at 0, like elu.
  EXPECT_TRUE(AllClose(grad("selu", {-1, 0, 1}), {kSeluScale * kSeluAlpha * std::exp(-1.0),
                                                  kSeluScale * kSeluAlpha, kSeluScale}));
  EXPECT_TRUE(AllClose(grad("celu", {-1, 0, 1}, {{"alpha", 2.0}}), {std::exp(-0.5), 1, 1}));
  EXPECT_TRUE(AllClose(grad("logsigmoid", {0}), {0.5}));
  EXPECT_TRUE(AllClose(grad("softsign", {0, 1}), {1, 0.25}));
  EXPECT_TRUE(AllClose(grad("tanhshrink", {0}), {0}));
  EXPECT_TRUE(AllClose(grad("mish", {0}), {std::tanh(std::log(2.0))}));
}

TEST(HardShrinkGluActivationGrad, Prelu) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {3}}, {{2, 3, 4}, {1}}, {{2, 3}, {}}, {{5}, {1}}, {{}, {}}, {{2, 2, 2, 3}, {2}}};
  uint32_t seed = 30;
  for (const auto& [xs, ws] : cases) {
    EXPECT_TRUE(GradCheck("prelu", {AwayFromZero(xs, ++seed), X(ws, ++seed, -1, 1)}))
        << ShapeToString(xs) << " weight " << ShapeToString(ws);
  }
  // x == 0 takes the slope branch for the input and contributes nothing to the weight.
  std::vector<Tensor> g = Gradients("prelu", {Values(DType::kF64, {2, 2}, {-2, 0, 3, -1}),
                                              Values(DType::kF64, {2}, {0.25, -0.5})});
  EXPECT_TRUE(AllClose(g[0], {0.25, -0.5, 1, -0.5}));
  EXPECT_EQ(g[1].shape(), (Shape{2}));
  EXPECT_TRUE(AllClose(g[1], {-2, -1}));
  // Empty input: zero weight gradient of the weight's shape.
  std::vector<Tensor> e =
      Gradients("prelu", {X({0, 3}, 40), Values(DType::kF64, {3}, {0.1, 0.2, 0.3})});
  EXPECT_TRUE(AllClose(e[1], {0, 0, 0}));
}

TEST(HardShrinkGluActivationGrad, GluAndSoftminAlongEveryDim) {
  Tensor x = X({4, 2, 6}, 50);
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    EXPECT_TRUE(GradCheck("glu", {x}, {{"dim", dim}})) << "glu dim " << dim;
  }
  EXPECT_TRUE(GradCheck("glu", {X({6}, 51)}));
  EXPECT_TRUE(GradCheck("glu", {X({0, 4}, 52)}));
  for (int64_t dim : {0, 1, 2, -1}) {
    EXPECT_TRUE(GradCheck("softmin", {x}, {{"dim", dim}})) << "softmin dim " << dim;
  }
  EXPECT_TRUE(GradCheck("softmin", {X({}, 53)}, {{"dim", int64_t{0}}}));
  // softmin's gradient sums to zero along dim; dtype= differentiates through the cast.
  std::vector<Tensor> g = Gradients("softmin", {X({2, 3}, 54)}, {{"dim", int64_t{1}}});
  EXPECT_TRUE(AllClose(g[0], std::vector<double>(6, 0.0), 0, 1e-12));
  std::vector<Tensor> g32 = Gradients("softmin", {Random(DType::kF32, {2, 3}, 55)},
                                      {{"dim", int64_t{0}}, {"dtype", std::string("float64")}});
  ASSERT_TRUE(g32[0].defined());
  EXPECT_EQ(g32[0].dtype(), DType::kF32);
  EXPECT_TRUE(AllClose(g32[0], std::vector<double>(6, 0.0), 0, 1e-6));
}

TEST(HardShrinkGluActivationGrad, BalancedCheckpointingRecomputes) {
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  EXPECT_TRUE(GradCheck("hardswish", {AwayFrom({2, 3}, 60, -5, 5, {-3, 3})}, {}, balanced));
  EXPECT_TRUE(GradCheck("mish", {X({2, 3}, 61)}, {}, balanced));
  EXPECT_TRUE(GradCheck("celu", {X({2, 3}, 62)}, {{"alpha", 1.5}}, balanced));
  EXPECT_TRUE(GradCheck("prelu", {AwayFromZero({2, 3}, 63), X({3}, 64)}, {}, balanced));
  EXPECT_TRUE(GradCheck("glu", {X({2, 4}, 65)}, {{"dim", int64_t{1}}}, balanced));
  EXPECT_TRUE(GradCheck("softmin", {X({2, 3}, 66)}, {{"dim", int64_t{0}}}, balanced));
}

}  // namespace
}  // namespace tensord
