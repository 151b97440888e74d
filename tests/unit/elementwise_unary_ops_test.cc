// Unary elementwise ops: every op × dtype against a plain C++ reference (0-d, empty and
// larger shapes), output dtypes (integer inputs of float functions give f32), PyTorch's edge
// values and error reasons.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/unit/elementwise_test_util.h"

namespace tensord {
namespace {
using namespace testing;

enum class Out { kSame, kFloat, kBool };

struct UnaryCase {
  std::string op;
  DTypeSet dtypes;
  std::function<double(double)> ref;
  double lo, hi;
  Out out = Out::kSame;
  AttrMap attrs = {};
};

double Sign(double x) { return (x > 0) - (x < 0); }

std::vector<UnaryCase> Cases() {
  const double inf = std::numeric_limits<double>::infinity();
  return {
      {"neg", kFloatInt, [](double x) { return -x; }, -5, 5},
      {"abs", kFloatInt, [](double x) { return std::fabs(x); }, -5, 5},
      {"square", kFloatInt, [](double x) { return x * x; }, -5, 5},
      {"exp", kAll, [](double x) { return std::exp(x); }, -3, 3, Out::kFloat},
      {"log", kAll, [](double x) { return std::log(x); }, 0.1, 6, Out::kFloat},
      {"sqrt", kAll, [](double x) { return std::sqrt(x); }, 0, 6, Out::kFloat},
      {"rsqrt", kAll, [](double x) { return 1 / std::sqrt(x); }, 0.1, 6, Out::kFloat},
      {"reciprocal", kAll, [](double x) { return 1 / x; }, 0.5, 6, Out::kFloat},
      {"sign", kAll, Sign, -3, 3},
      {"floor", kFloatInt, [](double x) { return std::floor(x); }, -3, 3},
      {"ceil", kFloatInt, [](double x) { return std::ceil(x); }, -3, 3},
      {"trunc", kFloatInt, [](double x) { return std::trunc(x); }, -3, 3},
      {"round", kFloatInt, [](double x) { return std::nearbyint(x); }, -3, 3},
      {"round",
       kFloat,
       [](double x) { return std::nearbyint(x * 100) / 100; },
       -3,
       3,
       Out::kSame,
       {{"decimals", int64_t{2}}}},
      {"round",
       kFloat,
       [](double x) { return std::nearbyint(x / 10) * 10; },
       -300,
       300,
       Out::kSame,
       {{"decimals", int64_t{-1}}}},
      {"frac", kFloat, [](double x) { return x - std::trunc(x); }, -3, 3},
      {"clamp",
       kFloatInt,
       [](double x) { return std::min(std::max(x, -1.0), 2.0); },
       -4,
       4,
       Out::kSame,
       {{"min", -1.0}, {"max", 2.0}}},
      {"clamp",
       kFloatInt,
       [](double x) { return std::max(x, 0.0); },
       -4,
       4,
       Out::kSame,
       {{"min", int64_t{0}}}},
      {"clamp",
       kFloatInt,
       [](double x) { return std::min(x, 1.0); },
       -4,
       4,
       Out::kSame,
       {{"max", 1.0}, {"min", -inf}}},
      {"logical_not", kAll, [](double x) { return x == 0 ? 1.0 : 0.0; }, -2, 2, Out::kBool},
      {"isnan", kAll, [](double x) { return std::isnan(x) ? 1.0 : 0.0; }, -2, 2, Out::kBool},
      {"isinf", kAll, [](double x) { return std::isinf(x) ? 1.0 : 0.0; }, -2, 2, Out::kBool},
      {"isfinite", kAll, [](double x) { return std::isfinite(x) ? 1.0 : 0.0; }, -2, 2, Out::kBool},
  };
}

TEST(UnaryOps, EveryOpAndDtypeMatchesReference) {
  const std::vector<Shape> shapes = {{2, 3}, {}, {0, 3}, {4, 5, 6}};
  uint32_t seed = 1;
  for (const UnaryCase& c : Cases()) {
    for (DType d : c.dtypes.ToVector()) {
      const DType out = c.out == Out::kBool                   ? DType::kBool
                        : c.out == Out::kFloat && !IsFloat(d) ? DType::kF32
                                                              : d;
      for (const Shape& s : shapes) {
        Tensor x = Random(d, s, ++seed, c.lo, c.hi);
        std::vector<double> expected;
        for (double v : x.ToDoubles()) expected.push_back(c.ref(v));
        EXPECT_TRUE(Matches(c.op, {x}, c.attrs, out, s, expected))
            << c.op << " " << DTypeName(d) << ShapeToString(s);
      }
    }
  }
}

TEST(UnaryOps, EdgeValuesMatchPyTorch) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (DType d : {DType::kF32, DType::kF64}) {
    const Tensor special = Values(d, {5}, {nan, inf, -inf, -1, 0});
    EXPECT_TRUE(AllClose(Run1("sqrt", {special}), {nan, inf, nan, nan, 0}));
    EXPECT_TRUE(AllClose(Run1("log", {special}), {nan, inf, nan, nan, -inf}));
    EXPECT_TRUE(AllClose(Run1("rsqrt", {special}), {nan, 0, nan, nan, inf}));
    EXPECT_TRUE(AllClose(Run1("reciprocal", {special}), {nan, 0, -0.0, -1, inf}));
    EXPECT_TRUE(AllClose(Run1("isnan", {special}), {1, 0, 0, 0, 0}));
    EXPECT_TRUE(AllClose(Run1("isinf", {special}), {0, 1, 1, 0, 0}));
    EXPECT_TRUE(AllClose(Run1("isfinite", {special}), {0, 0, 0, 1, 1}));
    EXPECT_TRUE(AllClose(Run1("logical_not", {special}), {0, 0, 0, 0, 1}));
    // PyTorch's sign: NaN gives 0 (every comparison with it is false).
    EXPECT_TRUE(AllClose(Run1("sign", {special}), {0, 1, -1, -1, 0}));
    EXPECT_TRUE(AllClose(Run1("abs", {special}), {nan, inf, inf, 1, 0}));
    // Round half to even, like torch.round.
    const Tensor halves = Values(d, {6}, {0.5, 1.5, 2.5, -0.5, -2.5, 3.49});
    EXPECT_TRUE(AllClose(Run1("round", {halves}), {0, 2, 2, 0, -2, 3}));
    EXPECT_TRUE(AllClose(Run1("frac", {Values(d, {2}, {-2.25, 3.75})}), {-0.25, 0.75}));
    // clamp keeps NaN, and min > max gives max everywhere.
    const Tensor x = Values(d, {3}, {nan, -5, 5});
    EXPECT_TRUE(AllClose(Run1("clamp", {x}, {{"min", -1.0}, {"max", 1.0}}), {nan, -1, 1}));
    EXPECT_TRUE(AllClose(Run1("clamp", {x}, {{"min", 2.0}, {"max", 1.0}}), {nan, 1, 1}));
  }
  // Integer abs/neg of the lowest value wrap (as in PyTorch) rather than trap.
  const double lo = std::numeric_limits<int64_t>::lowest();
  EXPECT_TRUE(AllClose(Run1("abs", {Values(DType::kI64, {1}, {lo})}), {lo}));
  // An integer input clamped to a fractional bound gives f32; out-of-range bounds saturate.
  Tensor c = Run1("clamp", {Values(DType::kI32, {3}, {-3, 0, 3})}, {{"min", 0.5}});
  EXPECT_EQ(c.dtype(), DType::kF32);
  EXPECT_TRUE(AllClose(c, {0.5, 0.5, 3}));
  Tensor big = Run1("clamp", {Values(DType::kI32, {2}, {-3, 3})}, {{"min", -1e12}, {"max", 1e12}});
  EXPECT_EQ(big.dtype(), DType::kI32);
  EXPECT_TRUE(AllClose(big, {-3, 3}));
  // Float functions of integers and bools compute in f32.
  Tensor e = Run1("exp", {Values(DType::kBool, {2}, {0, 1})});
  EXPECT_EQ(e.dtype(), DType::kF32);
  EXPECT_TRUE(AllClose(e, {1, std::exp(1.0)}));
}

TEST(UnaryOps, ErrorsCarryTheRightReason) {
  const Tensor i = Values(DType::kI32, {2}, {1, 2});
  const Tensor b = Values(DType::kBool, {2}, {1, 0});
  const Tensor f = Random(DType::kF32, {2}, 1);
  EXPECT_EQ(ReasonOf(RunOp("frac", {i})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("neg", {b})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("floor", {b})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("clamp", {b}, {{"min", 0.0}})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("clamp", {f})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("clamp", {f}, {{"min", std::string("x")}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("round", {i}, {{"decimals", int64_t{1}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("exp", {f, f})), Reason::kWrongArity);
}

TEST(UnaryOps, MarkingsFollowTheCatalog) {
  const OpRegistry& r = OpRegistry::Builtin();
  for (const char* z : {"sign", "floor", "ceil", "round", "trunc"}) {
    EXPECT_EQ((*r.Find(z))->marking, Marking::kZeroGrad) << z;
  }
  for (const char* n : {"logical_not", "isnan", "isinf", "isfinite", "eq", "logical_xor"}) {
    EXPECT_EQ((*r.Find(n))->marking, Marking::kNonDifferentiable) << n;
  }
  for (const char* d : {"frac", "clamp", "abs", "where", "pow", "maximum"}) {
    EXPECT_EQ((*r.Find(d))->marking, Marking::kDifferentiable) << d;
    EXPECT_FALSE((*r.Find(d))->compute_bound) << d;
  }
}

}  // namespace
}  // namespace tensord
