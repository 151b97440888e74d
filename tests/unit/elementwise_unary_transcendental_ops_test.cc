// Unary transcendental math (log1p, expm1, log2, log10, exp2, trigonometric and hyperbolic
// functions and their inverses, erf, erfc, erfinv): every op × dtype against a reference computed
// here (0-d, empty and larger shapes; integer and bool inputs give f32), values at the edges of
// each domain, erfinv against a bisection of erf / erfc, and error reasons.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/unit/elementwise_test_util.h"

namespace tensord {
namespace {
using namespace testing;

const double kNan = std::nan("");
const double kInf = std::numeric_limits<double>::infinity();

// erfinv by bisection: erf for |y| <= 0.5, erfc beyond, where 1 - |y| is exact.
double ErfInvRef(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return kNan;
  if (y == 1 || y == -1) return std::copysign(kInf, y);
  const double a = std::fabs(y);
  // erfinv(a) < a for a <= 0.5, so the bracket scales with tiny arguments.
  double lo = 0, hi = a <= 0.5 ? a : 10;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    const bool below = a <= 0.5 ? std::erf(mid) < a : std::erfc(mid) > 1 - a;
    (below ? lo : hi) = mid;
  }
  return std::copysign(0.5 * (lo + hi), y);
}

struct UnaryCase {
  std::string op;
  std::function<double(double)> ref;
  double lo, hi;
};

std::vector<UnaryCase> Cases() {
  return {
      {"log1p", [](double x) { return std::log(1 + x); }, -0.9, 6},
      {"expm1", [](double x) { return std::exp(x) - 1; }, -3, 3},
      {"log2", [](double x) { return std::log(x) / std::log(2.0); }, 0.1, 9},
      {"log10", [](double x) { return std::log(x) / std::log(10.0); }, 0.1, 9},
      {"exp2", [](double x) { return std::pow(2.0, x); }, -5, 5},
      {"sin", [](double x) { return std::sin(x); }, -4, 4},
      {"cos", [](double x) { return std::cos(x); }, -4, 4},
      {"tan", [](double x) { return std::sin(x) / std::cos(x); }, -1.4, 1.4},
      {"asin", [](double x) { return std::atan2(x, std::sqrt(1 - x * x)); }, -0.99, 0.99},
      {"acos", [](double x) { return std::atan2(std::sqrt(1 - x * x), x); }, -0.99, 0.99},
      {"atan", [](double x) { return std::atan2(x, 1.0); }, -5, 5},
      {"sinh", [](double x) { return (std::exp(x) - std::exp(-x)) / 2; }, -3, 3},
      {"cosh", [](double x) { return (std::exp(x) + std::exp(-x)) / 2; }, -3, 3},
      {"asinh",
       [](double x) { return std::copysign(std::log(std::fabs(x) + std::sqrt(x * x + 1)), x); }, -5,
       5},
      {"acosh", [](double x) { return std::log(x + std::sqrt(x * x - 1)); }, 1, 6},
      {"atanh", [](double x) { return 0.5 * std::log((1 + x) / (1 - x)); }, -0.95, 0.95},
      {"erf", [](double x) { return std::erf(x); }, -3, 3},
      {"erfc", [](double x) { return std::erfc(x); }, -3, 3},
      {"erfinv", ErfInvRef, -0.999, 0.999},
  };
}

// References above are written differently from the kernels' library calls, so they carry a
// few ulp of their own error in f64.
Tolerance RefTol(DType d) {
  return d == DType::kF64 ? Tolerance{1e-11, 1e-13} : Tolerance{2e-5, 2e-6};
}

TEST(UnaryTranscendentalOps, EveryOpAndDtypeMatchesReference) {
  const std::vector<Shape> shapes = {{2, 3}, {}, {0, 3}, {4, 5, 6}};
  uint32_t seed = 1;
  for (const UnaryCase& c : Cases()) {
    for (DType d : kAll.ToVector()) {
      const DType out = IsFloat(d) ? d : DType::kF32;
      for (const Shape& s : shapes) {
        Tensor x = Random(d, s, ++seed, c.lo, c.hi);
        std::vector<double> expected;
        for (double v : x.ToDoubles()) expected.push_back(c.ref(v));
        Tensor y = Run1(c.op, {x});
        ASSERT_TRUE(y.defined()) << c.op;
        EXPECT_EQ(y.dtype(), out) << c.op << " " << DTypeName(d);
        EXPECT_EQ(y.shape(), s) << c.op;
        const Tolerance tol = RefTol(out);
        EXPECT_TRUE(AllClose(y, expected, tol.rtol, tol.atol))
            << c.op << " " << DTypeName(d) << ShapeToString(s);
      }
    }
  }
}

TEST(UnaryTranscendentalOps, EdgesOfTheDomains) {
  for (DType d : {DType::kF32, DType::kF64}) {
    auto run = [d](const char* op, const std::vector<double>& in) {
      return Run1(op, {Values(d, {static_cast<int64_t>(in.size())}, in)});
    };
    EXPECT_TRUE(AllClose(run("log1p", {-1, -2, kInf, kNan}), {-kInf, kNan, kInf, kNan}));
    EXPECT_TRUE(AllClose(run("expm1", {-kInf, kInf, 0}), {-1, kInf, 0}));
    EXPECT_TRUE(AllClose(run("log2", {0, -1, 8, 0.125}), {-kInf, kNan, 3, -3}));
    EXPECT_TRUE(AllClose(run("log10", {0, 1000, 1e-3}), {-kInf, 3, -3}));
    EXPECT_TRUE(AllClose(run("exp2", {-kInf, 10, -3}), {0, 1024, 0.125}));
    EXPECT_TRUE(AllClose(run("sin", {kInf, kNan, 0}), {kNan, kNan, 0}));
    EXPECT_TRUE(AllClose(run("asin", {1, -1, 1.5}), {M_PI / 2, -M_PI / 2, kNan}));
    EXPECT_TRUE(AllClose(run("acos", {1, -1, -1.5}), {0, M_PI, kNan}));
    EXPECT_TRUE(AllClose(run("atan", {kInf, -kInf}), {M_PI / 2, -M_PI / 2}));
    EXPECT_TRUE(AllClose(run("cosh", {kInf, -kInf, 0}), {kInf, kInf, 1}));
    EXPECT_TRUE(AllClose(run("acosh", {1, 0.5, kInf}), {0, kNan, kInf}));
    EXPECT_TRUE(AllClose(run("atanh", {1, -1, 2}), {kInf, -kInf, kNan}));
    EXPECT_TRUE(AllClose(run("erf", {kInf, -kInf, 0}), {1, -1, 0}));
    EXPECT_TRUE(AllClose(run("erfc", {kInf, -kInf, 0}), {0, 2, 1}));
    // torch.erfinv: ±1 → ±inf, outside [-1, 1] and NaN → NaN.
    EXPECT_TRUE(
        AllClose(run("erfinv", {1, -1, 1.5, -2, kNan, 0}), {kInf, -kInf, kNan, kNan, kNan, 0}));
    EXPECT_TRUE(std::signbit(run("erfinv", {-0.0}).ToDoubles()[0]));
  }
  // Small arguments keep full relative precision where the naive formulas would cancel.
  Tensor tiny = Values(DType::kF64, {2}, {1e-12, -1e-12});
  EXPECT_TRUE(AllClose(Run1("log1p", {tiny}), {1e-12 - 5e-25, -1e-12 - 5e-25}, 1e-15, 0));
  EXPECT_TRUE(AllClose(Run1("expm1", {tiny}), {1e-12 + 5e-25, -1e-12 + 5e-25}, 1e-15, 0));
  EXPECT_TRUE(AllClose(Run1("erfinv", {tiny}),
                       {1e-12 * std::sqrt(M_PI) / 2, -1e-12 * std::sqrt(M_PI) / 2}, 1e-15, 0));
}

// erfinv deep in the tails and near 0, in both float dtypes, is the inverse of erf.
TEST(UnaryTranscendentalOps, ErfinvIsTheInverseOfErf) {
  std::vector<double> ys = {1e-300, 1e-8, 0.1, 0.4999, 0.5, 0.5001, 0.9, 0.99, 0.999999};
  for (double e : {1e-8, 1e-12, 1e-15, 1.1102230246251565e-16}) ys.push_back(1 - e);
  const int64_t n = static_cast<int64_t>(ys.size());
  std::vector<double> both = ys;
  for (double y : ys) both.push_back(-y);
  for (DType d : {DType::kF32, DType::kF64}) {
    Tensor x = Values(d, {2 * n}, both);
    std::vector<double> expected;
    for (double y : x.ToDoubles()) expected.push_back(ErfInvRef(y));
    const Tolerance tol = d == DType::kF64 ? Tolerance{1e-13, 0} : Tolerance{1e-6, 0};
    EXPECT_TRUE(AllClose(Run1("erfinv", {x}), expected, tol.rtol, tol.atol)) << DTypeName(d);
  }
  // Round trip through erf.
  Tensor y = Random(DType::kF64, {200}, 7, -1, 1);
  Tensor back = Run1("erf", {Run1("erfinv", {y})});
  EXPECT_TRUE(AllClose(back, y, 1e-14, 1e-16));
}

TEST(UnaryTranscendentalOps, ErrorsAndCatalogEntries) {
  const Tensor f = Random(DType::kF32, {2}, 1);
  const OpRegistry& r = OpRegistry::Builtin();
  for (const UnaryCase& c : Cases()) {
    EXPECT_EQ(ReasonOf(RunOp(c.op, {f, f})), Reason::kWrongArity) << c.op;
    EXPECT_EQ(ReasonOf(RunOp(c.op, {f}, {{"dim", int64_t{0}}})), Reason::kBadAttribute) << c.op;
    auto def = r.Find(c.op);
    ASSERT_TRUE(def.ok()) << c.op;
    EXPECT_EQ((*def)->marking, Marking::kDifferentiable) << c.op;
    EXPECT_EQ((*def)->category, "elementwise") << c.op;
  }
}

}  // namespace
}  // namespace tensord
