// Binary elementwise ops, comparisons, logical ops and where: every op × dtype against a plain
// C++ reference over broadcasting, 0-d, empty and wrapped-scalar operands; type promotion;
// error reasons; PyTorch's edge semantics.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/unit/elementwise_test_util.h"

namespace tensord {
namespace {
using namespace testing;

enum class Out { kSame, kBool, kTrueDiv };

struct BinaryCase {
  std::string op;
  DTypeSet dtypes;
  std::function<double(double, double)> ref;
  double lo, hi;  // input range (b too unless b_lo/b_hi differ)
  double b_lo, b_hi;
  AttrMap attrs;
  Out out = Out::kSame;
  bool integral = false;  // integer-valued inputs, so that ties and exact quotients occur
  bool nonzero_b = false;
  double scalar = 1.5;  // the wrapped-scalar operand
};

double FloorDiv(double a, double b) { return std::floor(a / b); }

std::vector<BinaryCase> Cases() {
  const double nan = std::nan("");
  auto rel = [](auto f) { return [f](double a, double b) { return f(a, b) ? 1.0 : 0.0; }; };
  auto truthy = [](double v) { return v != 0 || std::isnan(v); };
  return {
      {"add", kAll, [](double a, double b) { return a + b; }, -5, 5, -5, 5, {}},
      {"add",
       kFloatInt,
       [](double a, double b) { return a + 3 * b; },
       -5,
       5,
       -5,
       5,
       {{"alpha", 3.0}}},
      {"sub", kFloatInt, [](double a, double b) { return a - b; }, -5, 5, -5, 5, {}},
      {"sub",
       kFloatInt,
       [](double a, double b) { return a - 2 * b; },
       -5,
       5,
       -5,
       5,
       {{"alpha", int64_t{2}}}},
      {"mul", kAll, [](double a, double b) { return a * b; }, -5, 5, -5, 5, {}},
      {"div",
       kAll,
       [](double a, double b) { return a / b; },
       -5,
       5,
       -4,
       4,
       {},
       Out::kTrueDiv,
       false,
       true},
      {"div",
       kFloatInt,
       [](double a, double b) { return std::trunc(a / b); },
       -9,
       9,
       -4,
       4,
       {{"rounding_mode", std::string("trunc")}},
       Out::kSame,
       true,
       true},
      {"div",
       kFloatInt,
       FloorDiv,
       -9,
       9,
       -4,
       4,
       {{"rounding_mode", std::string("floor")}},
       Out::kSame,
       true,
       true},
      {"pow", kFloat, [](double a, double b) { return std::pow(a, b); }, 0.5, 2, -2, 2, {}},
      {"pow",
       kFloatInt,
       [](double a, double b) { return std::pow(a, b); },
       -3,
       4,
       0,
       4,
       {},
       Out::kSame,
       true,
       false,
       2.0},
      {"maximum",
       kAll,
       [](double a, double b) { return std::max(a, b); },
       -3,
       3,
       -3,
       3,
       {},
       Out::kSame,
       true},
      {"minimum",
       kAll,
       [](double a, double b) { return std::min(a, b); },
       -3,
       3,
       -3,
       3,
       {},
       Out::kSame,
       true},
      {"eq", kAll, rel(std::equal_to<>()), -2, 2, -2, 2, {}, Out::kBool, true},
      {"ne", kAll, rel(std::not_equal_to<>()), -2, 2, -2, 2, {}, Out::kBool, true},
      {"lt", kAll, rel(std::less<>()), -2, 2, -2, 2, {}, Out::kBool, true},
      {"le", kAll, rel(std::less_equal<>()), -2, 2, -2, 2, {}, Out::kBool, true},
      {"gt", kAll, rel(std::greater<>()), -2, 2, -2, 2, {}, Out::kBool, true},
      {"ge", kAll, rel(std::greater_equal<>()), -2, 2, -2, 2, {}, Out::kBool, true},
      {"logical_and",
       kAll,
       [=](double a, double b) { return double(truthy(a) && truthy(b)); },
       -2,
       2,
       -2,
       2,
       {},
       Out::kBool,
       true,
       false,
       0.0},
      {"logical_or",
       kAll,
       [=](double a, double b) { return double(truthy(a) || truthy(b)); },
       -2,
       2,
       -2,
       2,
       {},
       Out::kBool,
       true},
      {"logical_xor",
       kAll,
       [=](double a, double b) { return double(truthy(a) != truthy(b)); },
       -2,
       2,
       -2,
       2,
       {},
       Out::kBool,
       true,
       false,
       nan},
  };
}

std::string Label(const BinaryCase& c) {
  std::string s = c.op;
  for (const auto& [k, v] : c.attrs) s += " " + k + "=" + AttrValueToString(v);
  return s;
}

DType OutDType(const BinaryCase& c, DType compute) {
  if (c.out == Out::kBool) return DType::kBool;
  if (c.out == Out::kTrueDiv && !IsFloat(compute)) return DType::kF32;
  return compute;
}

void CheckCall(const BinaryCase& c, const Tensor& a, const Tensor& b, DType compute) {
  const DType out = OutDType(c, compute);
  const Shape shape = BroadcastOf({a.shape(), b.shape()});
  std::vector<double> expected = BroadcastRef({a, b}, shape, [&](const std::vector<double>& v) {
    // Operands are converted to the compute dtype before the op.
    double x = v[0], y = v[1];
    if (compute == DType::kF32) {
      x = static_cast<float>(x);
      y = static_cast<float>(y);
    }
    double r = c.ref(x, y);
    return out == DType::kBool ? (r != 0 ? 1.0 : 0.0) : r;
  });
  EXPECT_TRUE(Matches(c.op, {a, b}, c.attrs, out, shape, expected))
      << Label(c) << " " << DTypeName(a.dtype()) << ShapeToString(a.shape())
      << (a.wrapped_number() ? " (scalar)" : "") << " with " << DTypeName(b.dtype())
      << ShapeToString(b.shape()) << (b.wrapped_number() ? " (scalar)" : "");
}

Tensor NonZero(Tensor t) {
  std::vector<double> v = t.ToDoubles();
  for (double& x : v) x = x == 0 ? 3 : x;
  return Values(t.dtype(), t.shape(), v);
}

TEST(BinaryOps, EveryOpAndDtypeMatchesReference) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {1, 4}},    {{}, {2, 3}},    {{2, 3}, {}},
      {{0, 3}, {3}},    {{}, {}},      {{3, 1, 2}, {4, 1}}, {{5, 7}, {5, 7}}};
  uint32_t seed = 1;
  for (const BinaryCase& c : Cases()) {
    for (DType d : c.dtypes.ToVector()) {
      for (const auto& [sa, sb] : shapes) {
        Tensor a = Gen(d, sa, ++seed, c.lo, c.hi, c.integral);
        Tensor b = Gen(d, sb, ++seed, c.b_lo, c.b_hi, c.integral);
        if (c.nonzero_b && !IsBool(d)) b = NonZero(b);
        CheckCall(c, a, b, d);
      }
      // A wrapped scalar on either side: weaker than the tensor unless of a higher category.
      const DType compute = IsFloat(d) ? d : DType::kF32;
      Tensor t = Gen(d, {2, 3}, ++seed, c.lo, c.hi, c.integral);
      if (c.nonzero_b && !IsBool(d)) t = NonZero(t);
      CheckCall(c, t, ScalarOperand(c.scalar), compute);
      CheckCall(c, ScalarOperand(c.scalar), t, compute);
    }
  }
}

TEST(BinaryOps, PromotionFollowsPyTorch) {
  auto dtype_of = [](const std::string& op, std::vector<Tensor> in) {
    Tensor y = Run1(op, std::move(in));
    return y.defined() ? y.dtype() : DType::kBool;
  };
  const Tensor i32 = Values(DType::kI32, {2}, {1, 2});
  const Tensor i64 = Values(DType::kI64, {2}, {3, 4});
  const Tensor f32 = Values(DType::kF32, {2}, {1, 2});
  const Tensor f64 = Values(DType::kF64, {2}, {1, 2});
  const Tensor b = Values(DType::kBool, {2}, {1, 0});
  EXPECT_EQ(dtype_of("mul", {i32, ScalarOperand(0.5)}), DType::kF32);
  EXPECT_TRUE(AllClose(Run1("mul", {i32, ScalarOperand(0.5)}), {0.5, 1.0}));
  EXPECT_EQ(dtype_of("add", {f64, ScalarOperand(0.1)}), DType::kF64);
  EXPECT_EQ(dtype_of("add", {i32, i64}), DType::kI64);
  EXPECT_EQ(dtype_of("add", {i32, f32}), DType::kF32);
  EXPECT_EQ(dtype_of("add", {f32, f64}), DType::kF64);
  // A 0-d tensor is weaker than a dimensioned one of the same category; of a higher category
  // it gives its own dtype (a wrapped scalar gives the default dtype instead).
  EXPECT_EQ(dtype_of("add", {f32, Tensor::Scalar<double>(1.0)}), DType::kF32);
  EXPECT_EQ(dtype_of("add", {i32, Tensor::Scalar<double>(1.0)}), DType::kF64);
  EXPECT_EQ(dtype_of("add", {i32, Tensor::Scalar<int64_t>(1)}), DType::kI32);
  // bool + bool is logical or, bool * bool logical and (torch keeps bool).
  Tensor bb = Run1("add", {b, Values(DType::kBool, {2}, {1, 1})});
  EXPECT_EQ(bb.dtype(), DType::kBool);
  EXPECT_TRUE(AllClose(bb, {1, 1}));
  EXPECT_EQ(dtype_of("add", {b, i32}), DType::kI32);
  EXPECT_EQ(dtype_of("div", {i32, i64}), DType::kF32);
  EXPECT_EQ(dtype_of("div", {i32, f64}), DType::kF64);
  EXPECT_EQ(dtype_of("lt", {i32, f64}), DType::kBool);
  EXPECT_EQ(dtype_of("pow", {i64, ScalarOperand(2.0)}), DType::kF32);
  EXPECT_EQ(dtype_of("maximum", {i32, i64}), DType::kI64);
}

TEST(BinaryOps, ErrorsCarryTheRightReason) {
  const Tensor a = Random(DType::kF32, {2, 3}, 1);
  const Tensor i = Values(DType::kI64, {2}, {4, 5});
  auto bad_shape = RunOp("add", {a, Random(DType::kF32, {4}, 2)});
  EXPECT_EQ(ReasonOf(bad_shape), Reason::kShapeMismatch);
  EXPECT_NE(std::string(bad_shape.status().message()).find("add: shapes [2, 3] and [4]"),
            std::string::npos)
      << bad_shape.status();
  EXPECT_EQ(GetMetadata(bad_shape.status()).at("op"), "add");
  EXPECT_EQ(ReasonOf(RunOp("eq", {a, Random(DType::kF32, {2, 2}, 2)})), Reason::kShapeMismatch);
  const Tensor t = Values(DType::kBool, {2}, {1, 0});
  EXPECT_EQ(ReasonOf(RunOp("sub", {t, t})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("pow", {t, t})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("div", {t, t}, {{"rounding_mode", std::string("floor")}})),
            Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("div", {a, a}, {{"rounding_mode", std::string("round")}})),
            Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("add", {i, i}, {{"alpha", 0.5}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("add", {t, t}, {{"alpha", 2.0}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("mul", {a, a}, {{"alpha", 2.0}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("add", {a})), Reason::kWrongArity);
}

TEST(BinaryOps, IntegerDivisionByZeroIsAnErrorNotACrash) {
  for (DType d : {DType::kI32, DType::kI64}) {
    const Tensor a = Values(d, {3}, {1, 2, 3});
    const Tensor b = Values(d, {3}, {1, 0, 2});
    for (const char* mode : {"trunc", "floor"}) {
      auto r = RunOp("div", {a, b}, {{"rounding_mode", std::string(mode)}});
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(GetReason(r.status()), Reason::kInvalidRequest);
      EXPECT_EQ(r.status().message(), "div: integer division by zero");
    }
    // True division of integers is float division: inf and nan, no error.
    EXPECT_TRUE(AllClose(Run1("div", {a, b}), {1, std::numeric_limits<double>::infinity(), 1.5}));
  }
  // lowest / -1 overflows: it wraps like PyTorch instead of trapping.
  const Tensor lo = Values(DType::kI32, {1}, {double(std::numeric_limits<int32_t>::lowest())});
  Tensor q =
      Run1("div", {lo, Values(DType::kI32, {1}, {-1})}, {{"rounding_mode", std::string("trunc")}});
  EXPECT_TRUE(AllClose(q, {double(std::numeric_limits<int32_t>::lowest())}));
}

TEST(BinaryOps, EdgeSemanticsMatchPyTorch) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (DType d : {DType::kF32, DType::kF64}) {
    // Floor and trunc division of negative operands.
    const Tensor a = Values(d, {4}, {-7, 7, -7, 7});
    const Tensor b = Values(d, {4}, {2, -2, -2, 2});
    EXPECT_TRUE(
        AllClose(Run1("div", {a, b}, {{"rounding_mode", std::string("floor")}}), {-4, -4, 3, 3}));
    EXPECT_TRUE(
        AllClose(Run1("div", {a, b}, {{"rounding_mode", std::string("trunc")}}), {-3, -3, 3, 3}));
    // maximum/minimum propagate NaN from either side.
    const Tensor x = Values(d, {3}, {nan, 1, 2});
    const Tensor y = Values(d, {3}, {1, nan, 3});
    EXPECT_TRUE(AllClose(Run1("maximum", {x, y}), {nan, nan, 3}));
    EXPECT_TRUE(AllClose(Run1("minimum", {x, y}), {nan, nan, 2}));
    // NaN compares unequal; logical ops count NaN as true.
    EXPECT_TRUE(AllClose(Run1("eq", {x, x}), {0, 1, 1}));
    EXPECT_TRUE(AllClose(Run1("ne", {x, x}), {1, 0, 0}));
    EXPECT_TRUE(AllClose(Run1("logical_and", {x, Values(d, {3}, {1, 0, 1})}), {1, 0, 1}));
    // pow: 0^0 = 1, 0^-1 = inf, negative base with a fractional exponent is NaN.
    EXPECT_TRUE(AllClose(Run1("pow", {Values(d, {3}, {0, 0, -2}), Values(d, {3}, {0, -1, 0.5})}),
                         {1, inf, nan}));
    // Scalar exponents with a dedicated path agree with std::pow.
    const Tensor base = Values(d, {3}, {0.25, 4, 9});
    for (double e : {2.0, 3.0, 0.5, -0.5, -1.0, -2.0}) {
      std::vector<double> want;
      for (double v : {0.25, 4.0, 9.0}) want.push_back(std::pow(v, e));
      EXPECT_TRUE(AllClose(Run1("pow", {base, ScalarOperand(e)}), want)) << e;
    }
  }
  // Integer floor division rounds toward negative infinity; pow of ints stays exact.
  const Tensor ia = Values(DType::kI64, {4}, {-7, 7, -7, 7});
  const Tensor ib = Values(DType::kI64, {4}, {2, -2, -2, 2});
  EXPECT_TRUE(
      AllClose(Run1("div", {ia, ib}, {{"rounding_mode", std::string("floor")}}), {-4, -4, 3, 3}));
  Tensor p = Run1(
      "pow", {Values(DType::kI64, {4}, {3, 2, -1, 5}), Values(DType::kI64, {4}, {20, -1, -3, -2})});
  EXPECT_TRUE(AllClose(p, {3486784401.0, 0, -1, 0}));
  // Integer arithmetic wraps instead of invoking undefined behaviour.
  const double max32 = std::numeric_limits<int32_t>::max();
  EXPECT_TRUE(
      AllClose(Run1("add", {Values(DType::kI32, {1}, {max32}), Values(DType::kI32, {1}, {1})}),
               {double(std::numeric_limits<int32_t>::lowest())}));
}

TEST(Where, EveryDtypeWithBroadcastingAndScalars) {
  const std::vector<std::vector<Shape>> shapes = {{{2, 3}, {2, 3}, {2, 3}},
                                                  {{2, 1}, {1, 3}, {}},
                                                  {{3}, {2, 3}, {2, 1}},
                                                  {{}, {}, {}},
                                                  {{0, 3}, {3}, {0, 1}}};
  uint32_t seed = 100;
  for (DType d : kAll.ToVector()) {
    for (const auto& s : shapes) {
      Tensor cond = Random(DType::kBool, s[0], ++seed);
      Tensor a = Random(d, s[1], ++seed, -5, 5);
      Tensor b = Random(d, s[2], ++seed, -5, 5);
      const Shape out = BroadcastOf(s);
      auto ref = [](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; };
      EXPECT_TRUE(Matches("where", {cond, a, b}, {}, d, out, BroadcastRef({cond, a, b}, out, ref)))
          << DTypeName(d) << " " << ShapeToString(out);
    }
    Tensor cond = Values(DType::kBool, {3}, {1, 0, 1});
    Tensor a = Values(d, {3}, {1, 1, 0});
    const DType scalar_dtype = IsFloat(d) ? d : DType::kF32;
    EXPECT_TRUE(
        Matches("where", {cond, a, ScalarOperand(2.5)}, {}, scalar_dtype, {3}, {1, 2.5, 0}));
    EXPECT_TRUE(
        Matches("where", {cond, ScalarOperand(2.5), a}, {}, scalar_dtype, {3}, {2.5, 1, 2.5}));
  }
  // Value operands promote together; the condition is never promoted.
  Tensor mixed = Run1("where", {Values(DType::kBool, {2}, {1, 0}), Values(DType::kI32, {2}, {1, 2}),
                                Values(DType::kF64, {2}, {0.5, 0.25})});
  EXPECT_EQ(mixed.dtype(), DType::kF64);
  EXPECT_TRUE(AllClose(mixed, {1, 0.25}));
}

TEST(Where, ConditionMustBeBool) {
  const Tensor a = Random(DType::kF32, {3}, 1);
  auto r = RunOp("where", {a, a, a});
  EXPECT_EQ(ReasonOf(r), Reason::kDtypeMismatch);
  EXPECT_NE(std::string(r.status().message()).find("condition must be bool"), std::string::npos);
  EXPECT_EQ(ReasonOf(RunOp("where", {Random(DType::kBool, {2}, 1), a, a})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("where", {Random(DType::kBool, {3}, 1), a})), Reason::kWrongArity);
}

}  // namespace
}  // namespace tensord
