// relu6, selu, celu, mish, softsign, hardsigmoid, hardswish, hardtanh, logsigmoid, tanhshrink,
// softshrink, hardshrink and threshold: every op × dtype against a reference written here (0-d,
// empty and larger shapes, attribute variants, values exactly on each boundary); prelu with shared
// and per-channel slopes, glu along every dim, softmin, and error reasons.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/unit/elementwise_test_util.h"

namespace tensord {
namespace {
using namespace testing;

const double kNan = std::nan("");
const double kInf = std::numeric_limits<double>::infinity();
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

struct ActivationCase {
  std::string op;
  std::function<double(double)> ref;
  AttrMap attrs = {};
};

double Clamp(double x, double lo, double hi) { return std::min(std::max(x, lo), hi); }
double Softplus(double x) { return std::log(1 + std::exp(x)); }

std::vector<ActivationCase> Cases() {
  return {
      {"relu6", [](double x) { return Clamp(x, 0, 6); }},
      {"selu", [](double x) { return kSeluScale * (x > 0 ? x : kSeluAlpha * (std::exp(x) - 1)); }},
      {"celu", [](double x) { return x > 0 ? x : std::exp(x) - 1; }},
      {"celu", [](double x) { return x > 0 ? x : 2 * (std::exp(x / 2) - 1); }, {{"alpha", 2.0}}},
      {"celu",
       [](double x) { return x > 0 ? x : -0.5 * (std::exp(-2 * x) - 1); },
       {{"alpha", -0.5}}},
      {"mish", [](double x) { return x * std::tanh(Softplus(x)); }},
      {"softsign", [](double x) { return x / (1 + std::fabs(x)); }},
      {"hardsigmoid", [](double x) { return Clamp(x / 6 + 0.5, 0, 1); }},
      {"hardswish", [](double x) { return x * Clamp(x + 3, 0, 6) / 6; }},
      {"hardtanh", [](double x) { return Clamp(x, -1, 1); }},
      {"hardtanh",
       [](double x) { return Clamp(x, -2.5, 0.5); },
       {{"min_val", -2.5}, {"max_val", 0.5}}},
      {"logsigmoid", [](double x) { return -Softplus(-x); }},
      {"tanhshrink", [](double x) { return x - std::tanh(x); }},
      {"softshrink", [](double x) { return std::fabs(x) <= 0.5 ? 0 : x - std::copysign(0.5, x); }},
      {"softshrink",
       [](double x) { return std::fabs(x) <= 1.5 ? 0 : x - std::copysign(1.5, x); },
       {{"lambd", 1.5}}},
      {"hardshrink", [](double x) { return std::fabs(x) <= 0.5 ? 0 : x; }},
      {"hardshrink", [](double x) { return std::fabs(x) <= 2 ? 0 : x; }, {{"lambd", 2.0}}},
      {"threshold",
       [](double x) { return x > 0.5 ? x : -3; },
       {{"threshold", 0.5}, {"value", -3.0}}},
      {"threshold",
       [](double x) { return x > -1 ? x : 20; },
       {{"threshold", int64_t{-1}}, {"value", int64_t{20}}}},
  };
}

// Random values plus every boundary an op has (0, ±0.5, ±1, ±1.5, ±2, ±2.5, ±3, 6): the
// branch a boundary point takes is part of the semantics.
Tensor WithBoundaries(DType d, const Shape& s, uint32_t seed) {
  std::vector<double> v = Random(d, s, seed, -8, 8).ToDoubles();
  const double points[] = {0, 0.5, -0.5, 1, -1, 1.5, -1.5, 2, -2, 2.5, -2.5, 3, -3, 6, -6};
  for (size_t i = 0; i < v.size() && i < 2 * std::size(points); i += 2) v[i] = points[i / 2];
  return Values(d, s, v);
}

TEST(HardShrinkGluActivations, EveryOpAndDtypeMatchesReference) {
  const std::vector<Shape> shapes = {{2, 3}, {}, {0, 3}, {4, 5, 6}};
  uint32_t seed = 1;
  for (const ActivationCase& c : Cases()) {
    for (DType d : kFloat.ToVector()) {
      for (const Shape& s : shapes) {
        Tensor x = WithBoundaries(d, s, ++seed);
        std::vector<double> expected;
        for (double v : x.ToDoubles()) expected.push_back(c.ref(v));
        EXPECT_TRUE(Matches(c.op, {x}, c.attrs, d, s, expected))
            << c.op << " " << DTypeName(d) << ShapeToString(s);
      }
    }
  }
}

TEST(HardShrinkGluActivations, EdgeValues) {
  for (DType d : {DType::kF32, DType::kF64}) {
    auto run = [d](const char* op, const std::vector<double>& in, const AttrMap& attrs = {}) {
      return Run1(op, {Values(d, {static_cast<int64_t>(in.size())}, in)}, attrs);
    };
    const std::vector<double> special = {kNan, kInf, -kInf};
    EXPECT_TRUE(AllClose(run("relu6", special), {kNan, 6, 0}));
    EXPECT_TRUE(AllClose(run("hardtanh", special), {kNan, 1, -1}));
    EXPECT_TRUE(AllClose(run("hardsigmoid", special), {kNan, 1, 0}));
    EXPECT_TRUE(AllClose(run("selu", special), {kNan, kInf, -kSeluScale * kSeluAlpha}));
    EXPECT_TRUE(AllClose(run("celu", special), {kNan, kInf, -1}));
    EXPECT_TRUE(AllClose(run("softsign", special), {kNan, kNan, kNan}));
    EXPECT_TRUE(AllClose(run("logsigmoid", special), {kNan, 0, -kInf}));
    // Large inputs neither overflow nor lose the linear tail (e^-200 underflows in f32).
    const double tiny = d == DType::kF64 ? 1e-300 : 1e-30;
    EXPECT_TRUE(AllClose(run("logsigmoid", {-200, 200}), {-200, -std::exp(-200.0)}, 1e-6, tiny));
    EXPECT_TRUE(AllClose(run("mish", {-200, 200}), {-200 * std::exp(-200.0), 200}, 1e-6, tiny));
    EXPECT_TRUE(AllClose(run("softsign", {1e30, -1e30}), {1, -1}));
    // The shrinks and threshold keep NaN.
    EXPECT_TRUE(AllClose(run("softshrink", special), {kNan, kInf, -kInf}));
    EXPECT_TRUE(AllClose(run("hardshrink", special), {kNan, kInf, -kInf}));
    EXPECT_TRUE(
        AllClose(run("threshold", special, {{"threshold", 0.0}, {"value", 7.0}}), {kNan, kInf, 7}));
    // A zero lambd makes the shrinks the identity (0 stays 0).
    EXPECT_TRUE(AllClose(run("softshrink", {-1, 0, 2}, {{"lambd", 0.0}}), {-1, 0, 2}));
    // min_val == max_val is allowed: a constant.
    EXPECT_TRUE(AllClose(run("hardtanh", {-1, 0, 2}, {{"min_val", 0.5}, {"max_val", 0.5}}),
                         {0.5, 0.5, 0.5}));
  }
}

// prelu(x, w) with w per channel (dim 1) or shared.
std::vector<double> PreluRef(const Tensor& x, const Tensor& w) {
  std::vector<double> v = x.ToDoubles(), wv = w.ToDoubles();
  const Shape& s = x.shape();
  int64_t inner = 1;
  for (size_t i = 2; i < s.size(); ++i) inner *= s[i];
  const int64_t channels = s.size() > 1 ? s[1] : 1;
  for (size_t i = 0; i < v.size(); ++i) {
    const double slope = wv.size() == 1 ? wv[0] : wv[(i / inner) % channels];
    if (!(v[i] > 0)) v[i] *= slope;
  }
  return v;
}

TEST(Prelu, SharedAndPerChannelSlopes) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {3}},    {{2, 3, 4}, {1}}, {{2, 3, 4}, {}}, {{2, 3}, {3}},
      {{5, 2, 2, 3}, {2}}, {{4}, {1}},       {{}, {}},        {{}, {1}},
      {{0, 3}, {3}},       {{2, 0, 2}, {}},  {{3, 1, 2}, {1}}};
  uint32_t seed = 20;
  for (DType d : {DType::kF32, DType::kF64}) {
    for (const auto& [xs, ws] : cases) {
      Tensor x = WithBoundaries(d, xs, ++seed);
      Tensor w = Random(d, ws, ++seed, -1, 1);
      EXPECT_TRUE(Matches("prelu", {x, w}, {}, d, xs, PreluRef(x, w)))
          << DTypeName(d) << ShapeToString(xs) << " weight " << ShapeToString(ws);
    }
  }
  // NaN stays NaN (it is not > 0, so it takes the slope branch, as in PyTorch).
  Tensor y =
      Run1("prelu", {Values(DType::kF64, {3}, {kNan, 0, -2}), Values(DType::kF64, {1}, {-0.5})});
  EXPECT_TRUE(AllClose(y, {kNan, 0, 1}));
}

// glu along `dim`: first half times the sigmoid of the second.
std::vector<double> GluRef(const Tensor& x, int64_t dim) {
  const Shape& s = x.shape();
  if (dim < 0) dim += static_cast<int64_t>(s.size());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
    if (i < dim) outer *= s[i];
    if (i > dim) inner *= s[i];
  }
  const int64_t half = s[dim] / 2;
  std::vector<double> v = x.ToDoubles(), out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < half; ++k) {
      for (int64_t j = 0; j < inner; ++j) {
        const double a = v[(o * s[dim] + k) * inner + j];
        const double b = v[(o * s[dim] + k + half) * inner + j];
        out.push_back(a / (1 + std::exp(-b)));
      }
    }
  }
  return out;
}

TEST(Glu, EveryDimMatchesReference) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{4, 6, 2}, {0, 1, 2, -1, -2, -3}}, {{6}, {0, -1}}, {{0, 4}, {0, 1}}, {{2, 2}, {0, 1}}};
  uint32_t seed = 40;
  for (DType d : {DType::kF32, DType::kF64}) {
    for (const auto& [shape, dims] : cases) {
      Tensor x = Random(d, shape, ++seed, -5, 5);
      for (int64_t dim : dims) {
        Shape out = shape;
        out[dim < 0 ? dim + shape.size() : dim] /= 2;
        EXPECT_TRUE(Matches("glu", {x}, {{"dim", dim}}, d, out, GluRef(x, dim)))
            << DTypeName(d) << ShapeToString(shape) << " dim " << dim;
      }
    }
  }
  // dim defaults to -1.
  Tensor x = Random(DType::kF64, {3, 4}, 50);
  EXPECT_TRUE(Matches("glu", {x}, {}, DType::kF64, {3, 2}, GluRef(x, -1)));
}

// softmin(x) = exp(-x) / sum(exp(-x)) along dim, computed in double.
std::vector<double> SoftminRef(const Tensor& x, int64_t dim) {
  const Shape& s = x.shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  if (dim < 0) dim += std::max<int64_t>(rank, 1);
  int64_t outer = 1, size = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < dim ? outer : i == dim ? size : inner) *= s[i];
  std::vector<double> v = x.ToDoubles(), y(v.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t k) { return (o * size + k) * inner + j; };
      double m = kInf, sum = 0;
      for (int64_t k = 0; k < size; ++k) m = std::min(m, v[at(k)]);
      for (int64_t k = 0; k < size; ++k) sum += std::exp(m - v[at(k)]);
      for (int64_t k = 0; k < size; ++k) y[at(k)] = std::exp(m - v[at(k)]) / sum;
    }
  }
  return y;
}

TEST(Softmin, EveryDimMatchesReference) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{2, 3, 4}, {0, 1, 2, -1, -3}}, {{5}, {0, -1}}, {{}, {0, -1}}, {{0, 3}, {0, 1}}};
  uint32_t seed = 60;
  for (DType d : {DType::kF32, DType::kF64}) {
    for (const auto& [shape, dims] : cases) {
      Tensor x = Random(d, shape, ++seed, -5, 5);
      for (int64_t dim : dims) {
        EXPECT_TRUE(Matches("softmin", {x}, {{"dim", dim}}, d, shape, SoftminRef(x, dim)))
            << DTypeName(d) << ShapeToString(shape) << " dim " << dim;
      }
    }
  }
  // Large inputs stay finite; dtype= computes in (and returns) that dtype.
  EXPECT_TRUE(AllClose(
      Run1("softmin", {Values(DType::kF32, {3}, {-1000, -1001, -1002})}, {{"dim", int64_t{0}}}),
      SoftminRef(Values(DType::kF64, {3}, {0, -1, -2}), 0)));
  Tensor x = Random(DType::kF32, {2, 3}, 70);
  Tensor y = Run1("softmin", {x}, {{"dim", int64_t{1}}, {"dtype", std::string("float64")}});
  EXPECT_EQ(y.dtype(), DType::kF64);
  EXPECT_TRUE(AllClose(y, SoftminRef(x, 1), 1e-7, 1e-9));
}

TEST(HardShrinkGluActivations, ErrorsCarryTheRightReason) {
  const Tensor f = Random(DType::kF32, {2, 3}, 1);
  const Tensor i = Values(DType::kI64, {2}, {1, 2});
  for (const ActivationCase& c : Cases()) {
    EXPECT_EQ(ReasonOf(RunOp(c.op, {i}, c.attrs)), Reason::kDtypeMismatch) << c.op;
    EXPECT_EQ(ReasonOf(RunOp(c.op, {f, f}, c.attrs)), Reason::kWrongArity) << c.op;
  }
  auto attr_error = [&](const char* op, const AttrMap& attrs, const char* attr) {
    auto r = RunOp(op, {f}, attrs);
    EXPECT_EQ(ReasonOf(r), Reason::kBadAttribute) << op;
    if (!r.ok()) EXPECT_EQ(GetMetadata(r.status()).at("attribute"), attr) << op;
  };
  attr_error("celu", {{"alpha", 0.0}}, "alpha");
  attr_error("softshrink", {{"lambd", -0.5}}, "lambd");
  attr_error("hardtanh", {{"min_val", 2.0}, {"max_val", 1.0}}, "min_val");
  attr_error("threshold", {{"threshold", 1.0}}, "value");
  attr_error("threshold", {{"value", 1.0}}, "threshold");
  attr_error("relu6", {{"alpha", 1.0}}, "alpha");

  // prelu: slope count, weight rank and dtype.
  const Tensor x = Random(DType::kF32, {2, 3, 4}, 2);
  auto count = RunOp("prelu", {x, Random(DType::kF32, {2}, 3)});
  EXPECT_EQ(ReasonOf(count), Reason::kShapeMismatch);
  EXPECT_NE(std::string(count.status().message()).find("3 channels"), std::string::npos)
      << count.status();
  EXPECT_EQ(ReasonOf(RunOp("prelu", {x, Random(DType::kF32, {3, 1}, 3)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("prelu", {Random(DType::kF32, {}, 3), Random(DType::kF32, {3}, 3)})),
            Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("prelu", {Random(DType::kF32, {3}, 3), Random(DType::kF32, {3}, 3)})),
            Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("prelu", {x, Random(DType::kF64, {3}, 3)})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("prelu", {x})), Reason::kWrongArity);

  // glu: odd halving dim, 0-d input, dim out of range.
  auto odd = RunOp("glu", {Random(DType::kF32, {4, 3}, 4)});
  EXPECT_EQ(ReasonOf(odd), Reason::kShapeMismatch);
  EXPECT_NE(std::string(odd.status().message()).find("must be even"), std::string::npos);
  EXPECT_EQ(ReasonOf(RunOp("glu", {Random(DType::kF32, {4, 3}, 4)}, {{"dim", int64_t{0}}})),
            Reason::kUnspecified);
  EXPECT_EQ(ReasonOf(RunOp("glu", {Random(DType::kF32, {}, 4)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("glu", {f}, {{"dim", int64_t{2}}})), Reason::kBadAttribute);

  // softmin: dim required and in range, float dtype; errors name softmin.
  EXPECT_EQ(ReasonOf(RunOp("softmin", {f})), Reason::kBadAttribute);
  auto range = RunOp("softmin", {f}, {{"dim", int64_t{-3}}});
  EXPECT_EQ(ReasonOf(range), Reason::kBadAttribute);
  EXPECT_EQ(GetMetadata(range.status()).at("op"), "softmin");
  EXPECT_EQ(ReasonOf(RunOp("softmin", {f}, {{"dim", int64_t{0}}, {"dtype", std::string("int64")}})),
            Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("softmin", {i}, {{"dim", int64_t{0}}})), Reason::kDtypeMismatch);
}

TEST(HardShrinkGluActivations, CatalogEntries) {
  const OpRegistry& r = OpRegistry::Builtin();
  for (const char* op : {"relu6", "selu", "celu", "mish", "softsign", "hardsigmoid", "hardswish",
                         "hardtanh", "logsigmoid", "tanhshrink", "softshrink", "hardshrink",
                         "threshold", "prelu", "glu", "softmin"}) {
    auto def = r.Find(op);
    ASSERT_TRUE(def.ok()) << op;
    EXPECT_EQ((*def)->marking, Marking::kDifferentiable) << op;
    EXPECT_EQ((*def)->category, "activation") << op;
    EXPECT_FALSE((*def)->internal) << op;
    EXPECT_FALSE((*def)->compute_bound) << op;
    // All but softmin (a composite of neg and softmax) differentiate through a fused op.
    if (std::string(op) == "softmin") continue;
    auto backward = r.Find(std::string(op) + "_backward");
    ASSERT_TRUE(backward.ok()) << op;
    EXPECT_TRUE((*backward)->internal) << op;
  }
}

}  // namespace
}  // namespace tensord
