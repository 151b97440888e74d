// prod, norm, cumsum and cumprod against plain C++ references: prod over one dim or all, norm
// for every kind of p over dim lists, cumsum and cumprod along each dim; every dtype, keepdim,
// negative dims, 0-d and empty inputs, the dtype attribute, zeros, NaN, and the error cases with
// their reasons.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"
#include "tests/unit/reduction_test_util.h"

namespace tensord {
namespace {
using namespace testing;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Products of integers wrap modulo 2^64 like torch's int64 arithmetic; the inputs here are
// small enough that the double reference stays exact.
double RefProd(const std::vector<double>& v) {
  double p = 1;
  for (double e : v) p *= e;
  return p;
}

RefFn RefNorm(double p) {
  return [p](const std::vector<double>& v) {
    if (std::isinf(p)) {
      double m = p > 0 ? 0 : kInf;
      for (double e : v) {
        if (std::isnan(e)) return kNaN;
        m = p > 0 ? std::max(m, std::fabs(e)) : std::min(m, std::fabs(e));
      }
      return m;
    }
    double s = 0;
    for (double e : v) s += p == 0 ? (e != 0) : std::pow(std::fabs(e), p);
    return p == 0 ? s : std::pow(s, 1 / p);
  };
}

// A single-int (or absent) dim for prod: shapes with every dim, negative dims, size-1 dims,
// 0-d inputs and empty tensors.
struct OneDimCase {
  Shape shape;
  std::optional<int64_t> dim;
};
std::vector<OneDimCase> OneDimCases() {
  return {{{2, 3, 4}, {}}, {{2, 3, 4}, 0}, {{2, 3, 4}, 1},    {{2, 3, 4}, -1},
          {{2, 3, 4}, -3}, {{5}, {}},      {{5}, 0},          {{}, {}},
          {{}, 0},         {{}, -1},       {{1, 4, 1, 3}, 2}, {{37, 19}, 0},
          {{37, 19}, 1},   {{3, 0, 2}, 1}, {{3, 0, 2}, 0},    {{3, 0, 2}, {}}};
}

TEST(ProductNormScan, ProdMatchesReferenceForEveryDtype) {
  for (DType dt : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool}) {
    for (const OneDimCase& c : OneDimCases()) {
      for (bool keepdim : {false, true}) {
        // Factors near 1 keep long float products in range; integers in [-2, 2] include zeros.
        Tensor x = IsFloat(dt) ? Random(dt, c.shape, 3, 0.5, 1.5)
                               : Random(dt, c.shape, 3, -2, IsBool(dt) ? 1.5 : 3);
        AttrMap a = {{"keepdim", keepdim}};
        std::vector<int64_t> dims;
        if (c.dim) {
          a["dim"] = *c.dim;
          dims = {*c.dim};
        }
        // keepdim only applies with a dim: the full product is 0-d.
        const bool keep = keepdim && c.dim.has_value() && !c.shape.empty();
        ExpectReduction("prod", x, a, dims, keep, RefProd, IsFloat(dt) ? dt : DType::kI64);
      }
    }
  }
}

TEST(ProductNormScan, ProdOfEmptyIsOneAndZerosGiveZero) {
  Tensor e = Random(DType::kF32, {0, 3}, 1);
  EXPECT_TRUE(AllClose(Run1("prod", {e}), {1}));
  EXPECT_TRUE(AllClose(Run1("prod", {e}, {{"dim", int64_t{0}}}), {1, 1, 1}));
  EXPECT_EQ(Run1("prod", {e}, {{"dim", int64_t{1}}}).shape(), (Shape{0}));
  Tensor z = Values(DType::kF64, {2, 3}, {1, 0, 3, 4, 5, kNaN});
  EXPECT_TRUE(AllClose(Run1("prod", {z}, {{"dim", int64_t{1}}}), {0, kNaN}));
  EXPECT_TRUE(AllClose(Run1("prod", {z}, {{"dim", int64_t{0}}}), {4, 0, kNaN}));
}

TEST(ProductNormScan, ProdAccumulatesIntegersInI64AndHonoursDtype) {
  // 2^16 * 2^16 * 2 overflows i32 but not the i64 accumulator (torch.prod of int32 is int64).
  Tensor i = Values(DType::kI32, {3}, {65536, 65536, 2});
  Tensor p = Run1("prod", {i});
  ASSERT_EQ(p.dtype(), DType::kI64);
  EXPECT_EQ(p.data<int64_t>()[0], int64_t{1} << 33);
  // i64 products wrap modulo 2^64 (two's complement), as in PyTorch.
  Tensor big = Values(DType::kI64, {2}, {3037000500.0, 3037000500.0});
  const uint64_t want = uint64_t{3037000500} * uint64_t{3037000500};
  int64_t want_signed;
  std::memcpy(&want_signed, &want, sizeof(want));
  EXPECT_EQ(Run1("prod", {big}).data<int64_t>()[0], want_signed);
  // dtype casts each element first: torch.prod(x, dtype=torch.int64) of 1.5, 2.5, -1.7, 3.
  Tensor f = Values(DType::kF32, {4}, {1.5, 2.5, -1.7, 3});
  Tensor as_int = Run1("prod", {f}, {{"dtype", std::string("i64")}});
  EXPECT_EQ(as_int.dtype(), DType::kI64);
  EXPECT_TRUE(AllClose(as_int, {-6}, 0, 0));
  Tensor as_f64 = Run1("prod", {i}, {{"dtype", std::string("f64")}, {"dim", int64_t{0}}});
  EXPECT_EQ(as_f64.dtype(), DType::kF64);
  EXPECT_TRUE(AllClose(as_f64, {8589934592.0}));
  Tensor b = Values(DType::kBool, {2, 2}, {1, 1, 0, 1});
  Tensor pb = Run1("prod", {b}, {{"dim", int64_t{1}}, {"keepdim", true}});
  EXPECT_EQ(pb.dtype(), DType::kI64);
  EXPECT_EQ(pb.shape(), (Shape{2, 1}));
  EXPECT_TRUE(AllClose(pb, {1, 0}, 0, 0));
}

TEST(ProductNormScan, ProdRejectsBadDims) {
  Tensor x = Random(DType::kF32, {2, 3}, 1);
  auto out = RunOp("prod", {x}, {{"dim", int64_t{2}}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(GetReason(out.status()), Reason::kBadAttribute);
  EXPECT_EQ(GetMetadata(out.status()).at("op"), "prod");
  EXPECT_EQ(GetMetadata(out.status()).at("attribute"), "dim");
  // One int, not a list, as in PyTorch.
  EXPECT_EQ(GetReason(RunOp("prod", {x}, {{"dim", std::vector<int64_t>{0, 1}}}).status()),
            Reason::kBadAttribute);
  EXPECT_EQ(GetReason(RunOp("prod", {x}, {{"dtype", std::string("f8")}}).status()),
            Reason::kBadAttribute);
}

TEST(ProductNormScan, NormMatchesReferenceForEveryP) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    for (double p : {2.0, 1.0, 0.0, 3.0, 0.5, 1.5, -1.0, kInf, -kInf}) {
      for (const DimCase& c : ListCases()) {
        for (bool keepdim : {false, true}) {
          Tensor x = Random(dt, c.shape, 13, -2, 2);
          AttrMap a = DimAttrs(c.dims, keepdim);
          a["p"] = p;
          Groups g = GroupBy(x, c.dims, keepdim);
          const bool empty_group = !g.values.empty() && g.values[0].empty();
          if (empty_group && (p < 0 || p == kInf)) continue;  // refused, tested below
          ExpectReduction("norm", x, a, c.dims, keepdim, RefNorm(p), dt, 2e-5);
        }
      }
    }
  }
}

TEST(ProductNormScan, NormDefaultsAndSpecialValues) {
  Tensor x = Values(DType::kF64, {2, 3}, {3, 0, -4, 0, 0, 0});
  EXPECT_TRUE(AllClose(Run1("norm", {x}), {5}));  // p = 2 over every element
  Tensor rows = Run1("norm", {x}, {{"dim", int64_t{1}}, {"keepdim", true}});
  EXPECT_EQ(rows.shape(), (Shape{2, 1}));
  EXPECT_TRUE(AllClose(rows, {5, 0}));
  EXPECT_TRUE(AllClose(Run1("norm", {x}, {{"p", 0.0}, {"dim", int64_t{1}}}), {2, 0}));
  // A zero in a negative-p norm makes it 0: (sum |x|^-1)^-1 with an infinite term.
  EXPECT_TRUE(AllClose(Run1("norm", {x}, {{"p", -1.0}, {"dim", int64_t{1}}}), {0, 0}));
  EXPECT_TRUE(AllClose(Run1("norm", {x}, {{"p", -kInf}, {"dim", int64_t{0}}}), {0, 0, 0}));
  // p given as an int widens to a float.
  EXPECT_TRUE(AllClose(Run1("norm", {x}, {{"p", int64_t{1}}}), {7}));
  Tensor n = Values(DType::kF32, {3}, {1, kNaN, 2});
  for (double p : {2.0, 1.0, kInf, -kInf, 3.0}) {
    EXPECT_TRUE(AllClose(Run1("norm", {n}, {{"p", p}}), {kNaN})) << p;
  }
  // Empty: p >= 0 sums to 0; over an empty result nothing is reduced.
  Tensor e = Random(DType::kF32, {0, 3}, 1);
  EXPECT_TRUE(AllClose(Run1("norm", {e}), {0}));
  EXPECT_TRUE(AllClose(Run1("norm", {e}, {{"p", 0.0}, {"dim", int64_t{0}}}), {0, 0, 0}));
  EXPECT_EQ(Run1("norm", {e}, {{"p", kInf}, {"dim", int64_t{1}}}).shape(), (Shape{0}));
  // Large f32 values: the sum of squares is taken in double, so it does not overflow.
  Tensor big = Values(DType::kF32, {2}, {3e20, 4e20});
  EXPECT_TRUE(AllClose(Run1("norm", {big}), {5e20}));
}

TEST(ProductNormScan, NormErrors) {
  Tensor e = Random(DType::kF32, {3, 0}, 1);
  for (double p : {kInf, -kInf, -1.0}) {
    for (const AttrMap& dims : {AttrMap{}, AttrMap{{"dim", int64_t{1}}}}) {
      AttrMap a = dims;
      a["p"] = p;
      auto out = RunOp("norm", {e}, a);
      ASSERT_FALSE(out.ok()) << p;
      EXPECT_EQ(GetReason(out.status()), Reason::kShapeMismatch);
      EXPECT_NE(out.status().message().find("empty dimension 1"), std::string::npos)
          << out.status();
      EXPECT_EQ(GetMetadata(out.status()).at("attribute"), "p");
    }
  }
  Tensor x = Random(DType::kF32, {2, 3}, 1);
  EXPECT_EQ(GetReason(RunOp("norm", {x}, {{"p", kNaN}}).status()), Reason::kBadAttribute);
  EXPECT_EQ(GetReason(RunOp("norm", {x}, {{"dim", int64_t{2}}}).status()), Reason::kBadAttribute);
  EXPECT_EQ(GetReason(RunOp("norm", {x}, {{"dim", std::vector<int64_t>{0, -2}}}).status()),
            Reason::kBadAttribute);
  // torch.norm refuses integer inputs.
  for (DType dt : {DType::kI32, DType::kI64, DType::kBool}) {
    auto out = RunOp("norm", {Random(dt, {3}, 1, -3, 3)});
    EXPECT_EQ(GetReason(out.status()), Reason::kDtypeMismatch) << DTypeName(dt);
  }
}

// Reference scan along `dim`, by coordinates: element i accumulates the elements of its line
// at positions 0..pos(i).
std::vector<double> RefScan(const Tensor& x, int64_t dim, bool prod) {
  const Shape& s = x.shape();
  const int64_t rank = s.size();
  std::vector<double> v = x.ToDoubles(), out(v.size());
  if (rank == 0) return v;
  if (dim < 0) dim += rank;
  int64_t stride = 1;
  for (int64_t d = rank - 1; d > dim; --d) stride *= s[d];
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t pos = (i / stride) % s[dim];
    double acc = prod ? 1 : 0;
    for (int64_t k = 0; k <= pos; ++k) {
      const double e = v[i - (pos - k) * stride];
      acc = prod ? acc * e : acc + e;
    }
    out[i] = acc;
  }
  return out;
}

TEST(ProductNormScan, CumsumCumprodMatchReferenceForEveryDtype) {
  struct Case {
    Shape shape;
    int64_t dim;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4}, 0}, {{2, 3, 4}, 1}, {{2, 3, 4}, 2}, {{2, 3, 4}, -1},   {{2, 3, 4}, -3},
      {{5}, 0},       {{}, 0},        {{}, -1},       {{1, 4, 1, 3}, 2}, {{37, 19}, 0},
      {{37, 19}, 1},  {{3, 0, 2}, 1}, {{3, 0, 2}, 0}};
  for (DType dt : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool}) {
    const DType out_dtype = IsFloat(dt) ? dt : DType::kI64;
    for (const Case& c : cases) {
      for (const std::string op : {"cumsum", "cumprod"}) {
        SCOPED_TRACE(op + " " + ShapeToString(c.shape) + " dim " + std::to_string(c.dim) + " " +
                     std::string(DTypeName(dt)));
        const bool prod = op == "cumprod";
        Tensor x = IsFloat(dt) ? Random(dt, c.shape, 5, prod ? 0.5 : -3, prod ? 1.5 : 3)
                               : Random(dt, c.shape, 5, -2, IsBool(dt) ? 1.5 : 3);
        Tensor out = Run1(op, {x}, {{"dim", c.dim}});
        ASSERT_TRUE(out.defined());
        EXPECT_EQ(out.shape(), c.shape);
        EXPECT_EQ(out.dtype(), out_dtype);
        const double rtol = IsFloat(dt) ? 1e-5 : 0;
        EXPECT_TRUE(AllClose(out, RefScan(x, c.dim, prod), rtol, IsFloat(dt) ? 1e-6 : 0));
      }
    }
  }
}

TEST(ProductNormScan, ScansHonourDtypeAndZeros) {
  Tensor f = Values(DType::kF32, {3}, {1.5, 2.5, -1.7});
  Tensor as_int = Run1("cumsum", {f}, {{"dim", int64_t{0}}, {"dtype", std::string("i64")}});
  EXPECT_EQ(as_int.dtype(), DType::kI64);
  EXPECT_TRUE(AllClose(as_int, {1, 3, 2}, 0, 0));  // each element cast before summing
  Tensor i = Values(DType::kI32, {2, 2}, {65536, 65536, 3, 4});
  Tensor wide = Run1("cumprod", {i}, {{"dim", int64_t{1}}});
  EXPECT_EQ(wide.dtype(), DType::kI64);
  EXPECT_TRUE(AllClose(wide, {65536, 4294967296.0, 3, 12}, 0, 0));
  Tensor as_f64 = Run1("cumsum", {i}, {{"dim", int64_t{0}}, {"dtype", std::string("f64")}});
  EXPECT_EQ(as_f64.dtype(), DType::kF64);
  EXPECT_TRUE(AllClose(as_f64, {65536, 65536, 65539, 65540}));
  Tensor z = Values(DType::kF64, {5}, {2, 0, 3, 0, 4});
  EXPECT_TRUE(AllClose(Run1("cumprod", {z}, {{"dim", int64_t{0}}}), {2, 0, 0, 0, 0}));
  // f32 running sums accumulate in double: adding 1 to 1e8 one at a time in f32 (spacing 8)
  // would never move it.
  std::vector<double> ones(1000, 1.0);
  ones[0] = 1e8;
  Tensor acc = Run1("cumsum", {Values(DType::kF32, {1000}, ones)}, {{"dim", int64_t{0}}});
  EXPECT_EQ(acc.data<float>()[999], static_cast<float>(1e8 + 999));
}

TEST(ProductNormScan, ScanErrors) {
  Tensor x = Random(DType::kF32, {2, 3}, 1);
  for (const std::string op : {"cumsum", "cumprod"}) {
    auto missing = RunOp(op, {x});
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(GetReason(missing.status()), Reason::kBadAttribute) << op;
    auto out = RunOp(op, {x}, {{"dim", int64_t{-3}}});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(GetReason(out.status()), Reason::kBadAttribute);
    EXPECT_EQ(GetMetadata(out.status()).at("op"), op);
    EXPECT_NE(out.status().message().find("out of range"), std::string::npos) << out.status();
    EXPECT_EQ(GetReason(RunOp(op, {Values(DType::kF32, {}, {2})}, {{"dim", int64_t{1}}}).status()),
              Reason::kBadAttribute);
    EXPECT_EQ(GetReason(RunOp(op, {x, x}, {{"dim", int64_t{0}}}).status()), Reason::kWrongArity);
  }
}

}  // namespace
}  // namespace tensord
