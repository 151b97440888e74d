// Binary elementwise functions (remainder, fmod, atan2, hypot, bitwise ops) and lerp: every
// op × dtype against a plain C++ reference over broadcasting, 0-d, empty and wrapped-scalar
// operands; PyTorch's sign conventions and edge values; error reasons.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "tests/unit/elementwise_test_util.h"

namespace tensord {
namespace {
using namespace testing;

enum class Out { kSame, kFloat };

struct BinaryCase {
  std::string op;
  DTypeSet dtypes;
  std::function<double(double, double)> ref;
  double lo, hi;
  Out out = Out::kSame;
  bool integral = false;    // integer-valued float inputs too
  bool nonzero_b = false;   // keep divisors away from zero
  bool int_scalar = false;  // the wrapped scalar is an integer (bitwise ops refuse floats)
};

// Python's modulo and C's, from their definitions.
double PyMod(double a, double b) { return a - b * std::floor(a / b); }
double CMod(double a, double b) { return a - b * std::trunc(a / b); }

int64_t I(double v) { return static_cast<int64_t>(v); }

std::vector<BinaryCase> Cases() {
  return {
      {"remainder", kFloatInt, PyMod, -9, 9, Out::kSame, true, true},
      {"remainder", kFloat, PyMod, -9, 9, Out::kSame, false, true},
      {"fmod", kFloatInt, CMod, -9, 9, Out::kSame, true, true},
      {"fmod", kFloat, CMod, -9, 9, Out::kSame, false, true},
      {"atan2", kAll, [](double a, double b) { return std::atan2(a, b); }, -3, 3, Out::kFloat},
      {"hypot", kFloat, [](double a, double b) { return std::sqrt(a * a + b * b); }, -3, 3},
      {"bitwise_and", kIntBool, [](double a, double b) { return double(I(a) & I(b)); }, -20, 20,
       Out::kSame, false, false, true},
      {"bitwise_or", kIntBool, [](double a, double b) { return double(I(a) | I(b)); }, -20, 20,
       Out::kSame, false, false, true},
      {"bitwise_xor", kIntBool, [](double a, double b) { return double(I(a) ^ I(b)); }, -20, 20,
       Out::kSame, false, false, true},
  };
}

Tensor NonZero(Tensor t) {
  std::vector<double> v = t.ToDoubles();
  for (double& x : v) x = x == 0 ? 3 : x;
  return Values(t.dtype(), t.shape(), v);
}

Tensor IntScalarOperand(int64_t v) {
  Tensor t = Tensor::Scalar<int64_t>(v);
  t.set_wrapped_number(true);
  return t;
}

void CheckCall(const BinaryCase& c, const Tensor& a, const Tensor& b, DType compute) {
  const DType out = c.out == Out::kFloat && !IsFloat(compute) ? DType::kF32 : compute;
  const Shape shape = BroadcastOf({a.shape(), b.shape()});
  std::vector<double> expected = BroadcastRef({a, b}, shape, [&](const std::vector<double>& v) {
    double x = v[0], y = v[1];
    if (out == DType::kF32) {
      x = static_cast<float>(x);
      y = static_cast<float>(y);
    }
    return c.ref(x, y);
  });
  EXPECT_TRUE(Matches(c.op, {a, b}, {}, out, shape, expected))
      << c.op << " " << DTypeName(a.dtype()) << ShapeToString(a.shape())
      << (a.wrapped_number() ? " (scalar)" : "") << " with " << DTypeName(b.dtype())
      << ShapeToString(b.shape()) << (b.wrapped_number() ? " (scalar)" : "");
}

TEST(BinaryFunctionOps, EveryOpAndDtypeMatchesReference) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {1, 4}},    {{}, {2, 3}},    {{2, 3}, {}},
      {{0, 3}, {3}},    {{}, {}},      {{3, 1, 2}, {4, 1}}, {{5, 7}, {5, 7}}};
  uint32_t seed = 1;
  for (const BinaryCase& c : Cases()) {
    for (DType d : c.dtypes.ToVector()) {
      for (const auto& [sa, sb] : shapes) {
        Tensor a = Gen(d, sa, ++seed, c.lo, c.hi, c.integral);
        Tensor b = Gen(d, sb, ++seed, c.lo, c.hi, c.integral);
        if (c.nonzero_b && !IsBool(d)) b = NonZero(b);
        CheckCall(c, a, b, d);
      }
      // A wrapped scalar on either side: a float one makes integer tensors compute in f32.
      Tensor t = Gen(d, {2, 3}, ++seed, c.lo, c.hi, c.integral);
      if (c.nonzero_b && !IsBool(d)) t = NonZero(t);
      if (c.int_scalar) {
        const DType compute = IsBool(d) ? DType::kI64 : d;
        CheckCall(c, t, IntScalarOperand(6), compute);
        CheckCall(c, IntScalarOperand(-11), t, compute);
      } else {
        const DType compute = IsFloat(d) ? d : DType::kF32;
        CheckCall(c, t, ScalarOperand(1.5), compute);
        CheckCall(c, ScalarOperand(-2.5), t, compute);
      }
    }
  }
}

TEST(BinaryFunctionOps, ModuloSignsMatchPyTorch) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (DType d : {DType::kF32, DType::kF64, DType::kI32, DType::kI64}) {
    const Tensor a = Values(d, {4}, {-7, 7, -7, 7});
    const Tensor b = Values(d, {4}, {2, -2, -2, 2});
    // remainder takes the divisor's sign, fmod the dividend's.
    EXPECT_TRUE(AllClose(Run1("remainder", {a, b}), {1, -1, -1, 1})) << DTypeName(d);
    EXPECT_TRUE(AllClose(Run1("fmod", {a, b}), {-1, 1, -1, 1})) << DTypeName(d);
    const Tensor exact = Values(d, {2}, {-6, 6});
    EXPECT_TRUE(AllClose(Run1("remainder", {exact, Values(d, {2}, {3, -3})}), {0, 0}));
  }
  for (DType d : {DType::kF32, DType::kF64}) {
    // Float modulo by zero is NaN (no error); an infinite divisor keeps finite dividends
    // (remainder moves a dividend of the other sign to the divisor, like Python's %).
    const Tensor x = Values(d, {3}, {5, -5, 5});
    EXPECT_TRUE(AllClose(Run1("remainder", {x, Values(d, {3}, {0, 0, inf})}), {nan, nan, 5}));
    EXPECT_TRUE(AllClose(Run1("fmod", {x, Values(d, {3}, {0, inf, -inf})}), {nan, -5, 5}));
    EXPECT_TRUE(AllClose(Run1("remainder", {Values(d, {1}, {-5}), Values(d, {1}, {inf})}), {inf}));
    EXPECT_TRUE(
        AllClose(Run1("fmod", {Values(d, {2}, {5.5, -5.5}), ScalarOperand(2)}), {1.5, -1.5}));
  }
  // x % -1 is 0 even for the lowest value, which would trap a hardware division.
  for (DType d : {DType::kI32, DType::kI64}) {
    const double lo = d == DType::kI32 ? double(std::numeric_limits<int32_t>::lowest())
                                       : double(std::numeric_limits<int64_t>::lowest());
    const Tensor a = Values(d, {2}, {lo, 5});
    const Tensor m1 = Values(d, {2}, {-1, -1});
    EXPECT_TRUE(AllClose(Run1("remainder", {a, m1}), {0, 0}));
    EXPECT_TRUE(AllClose(Run1("fmod", {a, m1}), {0, 0}));
  }
}

TEST(BinaryFunctionOps, IntegerModuloByZeroIsAnErrorNotACrash) {
  for (DType d : {DType::kI32, DType::kI64}) {
    const Tensor a = Values(d, {3}, {1, 2, 3});
    const Tensor b = Values(d, {3}, {1, 0, 2});
    for (const char* op : {"remainder", "fmod"}) {
      auto r = RunOp(op, {a, b});
      ASSERT_FALSE(r.ok()) << op;
      EXPECT_EQ(GetReason(r.status()), Reason::kInvalidRequest);
      EXPECT_EQ(r.status().message(), std::string(op) + ": integer modulo by zero");
      EXPECT_EQ(GetMetadata(r.status()).at("op"), op);
    }
  }
}

TEST(BinaryFunctionOps, EdgeValues) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (DType d : {DType::kF32, DType::kF64}) {
    EXPECT_TRUE(
        AllClose(Run1("atan2", {Values(d, {4}, {0, 1, -1, nan}), Values(d, {4}, {-1, 0, 0, 1})}),
                 {M_PI, M_PI / 2, -M_PI / 2, nan}));
    // hypot is inf when either side is (even NaN), and does not overflow for large operands.
    EXPECT_TRUE(
        AllClose(Run1("hypot", {Values(d, {3}, {inf, nan, 3}), Values(d, {3}, {nan, -inf, 4})}),
                 {inf, inf, 5}));
    const double big = d == DType::kF64 ? 3e300 : 3e30;
    EXPECT_TRUE(AllClose(Run1("hypot", {Values(d, {1}, {big}), Values(d, {1}, {big * 4 / 3})}),
                         {big * 5 / 3}));
  }
  // atan2 and the bitwise ops on integers and bools.
  Tensor at = Run1("atan2", {Values(DType::kI64, {2}, {1, -1}), Values(DType::kI32, {2}, {1, 1})});
  EXPECT_EQ(at.dtype(), DType::kF32);
  EXPECT_TRUE(AllClose(at, {M_PI / 4, -M_PI / 4}));
  const Tensor t = Values(DType::kBool, {4}, {1, 1, 0, 0});
  const Tensor u = Values(DType::kBool, {4}, {1, 0, 1, 0});
  EXPECT_TRUE(AllClose(Run1("bitwise_and", {t, u}), {1, 0, 0, 0}));
  EXPECT_TRUE(AllClose(Run1("bitwise_or", {t, u}), {1, 1, 1, 0}));
  EXPECT_TRUE(AllClose(Run1("bitwise_xor", {t, u}), {0, 1, 1, 0}));
  Tensor bn = Run1("bitwise_not", {t});
  EXPECT_EQ(bn.dtype(), DType::kBool);
  EXPECT_TRUE(AllClose(bn, {0, 0, 1, 1}));
  // bool with an integer tensor promotes to the integer dtype.
  Tensor mixed = Run1("bitwise_or", {t, Values(DType::kI32, {4}, {2, 2, 4, 4})});
  EXPECT_EQ(mixed.dtype(), DType::kI32);
  EXPECT_TRUE(AllClose(mixed, {3, 3, 4, 4}));
}

TEST(BitwiseNot, EveryDtypeMatchesReference) {
  uint32_t seed = 40;
  for (DType d : kIntBool.ToVector()) {
    for (const Shape& s : std::vector<Shape>{{2, 3}, {}, {0, 3}, {4, 5, 6}}) {
      Tensor x = Random(d, s, ++seed, -100, 100);
      std::vector<double> expected;
      for (double v : x.ToDoubles()) expected.push_back(IsBool(d) ? double(v == 0) : double(~I(v)));
      EXPECT_TRUE(Matches("bitwise_not", {x}, {}, d, s, expected)) << DTypeName(d);
    }
  }
  const double lo = double(std::numeric_limits<int64_t>::lowest());
  EXPECT_TRUE(AllClose(Run1("bitwise_not", {Values(DType::kI64, {2}, {lo, -1})}),
                       {double(std::numeric_limits<int64_t>::max()), 0}));
}

double LerpRef(double a, double b, double w) { return a + w * (b - a); }

TEST(Lerp, TensorAndScalarWeightsWithBroadcasting) {
  const std::vector<std::vector<Shape>> shapes = {
      {{2, 3}, {2, 3}, {2, 3}}, {{2, 1}, {1, 3}, {}},    {{3}, {2, 3}, {2, 1}}, {{}, {}, {}},
      {{0, 3}, {3}, {0, 1}},    {{4, 1, 2}, {3, 1}, {2}}};
  uint32_t seed = 60;
  for (DType d : {DType::kF32, DType::kF64}) {
    for (const auto& s : shapes) {
      // Weights on both sides of 0.5, where the formula switches.
      Tensor a = Random(d, s[0], ++seed, -5, 5);
      Tensor b = Random(d, s[1], ++seed, -5, 5);
      Tensor w = Random(d, s[2], ++seed, -0.5, 1.5);
      const Shape out = BroadcastOf(s);
      auto ref = [](const std::vector<double>& v) { return LerpRef(v[0], v[1], v[2]); };
      EXPECT_TRUE(Matches("lerp", {a, b, w}, {}, d, out, BroadcastRef({a, b, w}, out, ref)))
          << DTypeName(d) << " " << ShapeToString(out);
    }
    // A number weight (wrapped f64 or i64) and a 0-d weight of the other float dtype are
    // converted to the input's dtype.
    Tensor a = Random(d, {2, 3}, ++seed, -5, 5);
    Tensor b = Random(d, {2, 3}, ++seed, -5, 5);
    const DType other = d == DType::kF32 ? DType::kF64 : DType::kF32;
    for (const Tensor& w : {ScalarOperand(0.25), ScalarOperand(0.75), IntScalarOperand(2),
                            Values(other, {}, {0.5})}) {
      const double wv = static_cast<double>(static_cast<float>(w.ElementAsDouble(0)));
      auto ref = [wv](const std::vector<double>& v) { return LerpRef(v[0], v[1], wv); };
      EXPECT_TRUE(Matches("lerp", {a, b, w}, {}, d, {2, 3}, BroadcastRef({a, b}, {2, 3}, ref)))
          << DTypeName(d) << " weight " << wv;
    }
  }
  // weight 1 gives `end` exactly, even when end - input rounds away (as in PyTorch).
  for (DType d : {DType::kF32, DType::kF64}) {
    Tensor y = Run1("lerp", {Values(d, {2}, {1e20, -3}), Values(d, {2}, {1, 7}), ScalarOperand(1)});
    EXPECT_TRUE(AllClose(y, {1, 7}, 0, 0));
    y = Run1("lerp", {Values(d, {2}, {1, 7}), Values(d, {2}, {1e20, -3}), ScalarOperand(0)});
    EXPECT_TRUE(AllClose(y, {1, 7}, 0, 0));
  }
}

TEST(BinaryFunctionOps, ErrorsCarryTheRightReason) {
  const Tensor f = Random(DType::kF32, {2, 3}, 1);
  const Tensor f64 = Random(DType::kF64, {2, 3}, 1);
  const Tensor i = Values(DType::kI64, {2}, {4, 5});
  const Tensor b = Values(DType::kBool, {2}, {1, 0});
  EXPECT_EQ(ReasonOf(RunOp("remainder", {f, Random(DType::kF32, {4}, 2)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("remainder", {b, b})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("fmod", {b, b})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("hypot", {i, i})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("atan2", {f, f, f})), Reason::kWrongArity);
  for (const char* op : {"bitwise_and", "bitwise_or", "bitwise_xor"}) {
    EXPECT_EQ(ReasonOf(RunOp(op, {f, f})), Reason::kDtypeMismatch) << op;
    // A float number makes an integer tensor float, which the bitwise ops refuse.
    EXPECT_EQ(ReasonOf(RunOp(op, {i, ScalarOperand(1.5)})), Reason::kDtypeMismatch) << op;
  }
  EXPECT_EQ(ReasonOf(RunOp("bitwise_not", {f})), Reason::kDtypeMismatch);
  // lerp refuses integer inputs and, like torch.lerp, dtypes that would need promotion.
  EXPECT_EQ(ReasonOf(RunOp("lerp", {i, i, ScalarOperand(0.5)})), Reason::kDtypeMismatch);
  auto mixed = RunOp("lerp", {f, f64, ScalarOperand(0.5)});
  EXPECT_EQ(ReasonOf(mixed), Reason::kDtypeMismatch);
  EXPECT_NE(std::string(mixed.status().message()).find("'end'"), std::string::npos)
      << mixed.status();
  EXPECT_EQ(GetMetadata(mixed.status()).at("input_index"), "1");
  EXPECT_EQ(ReasonOf(RunOp("lerp", {f, f, f64})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("lerp", {f, Random(DType::kF32, {4}, 3), ScalarOperand(0.5)})),
            Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("lerp", {f, f})), Reason::kWrongArity);
}

TEST(BinaryFunctionOps, CatalogEntries) {
  const OpRegistry& r = OpRegistry::Builtin();
  for (const char* d : {"remainder", "fmod", "atan2", "hypot", "lerp"}) {
    EXPECT_EQ((*r.Find(d))->marking, Marking::kDifferentiable) << d;
    EXPECT_FALSE((*r.Find(d))->compute_bound) << d;
  }
  for (const char* n : {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"}) {
    EXPECT_EQ((*r.Find(n))->marking, Marking::kNonDifferentiable) << n;
  }
}

}  // namespace
}  // namespace tensord
