// Reductions against a plain C++ reference: every op x dtype over random inputs, dims absent,
// single, negative and listed, keepdim, 0-d and empty inputs, and the error cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"
#include "tests/unit/reduction_test_util.h"

namespace tensord {
namespace {
using namespace testing;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double RefSum(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e;
  return s;
}
double RefMean(const std::vector<double>& v) { return RefSum(v) / v.size(); }
double RefMax(const std::vector<double>& v) {
  double m = -kInf;
  for (double e : v) {
    if (std::isnan(e)) return kNaN;
    m = std::max(m, e);
  }
  return m;
}
double RefMin(const std::vector<double>& v) {
  double m = kInf;
  for (double e : v) {
    if (std::isnan(e)) return kNaN;
    m = std::min(m, e);
  }
  return m;
}
double RefArgMax(const std::vector<double>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();
}
double RefArgMin(const std::vector<double>& v) {
  return std::min_element(v.begin(), v.end()) - v.begin();
}
RefFn RefVar(double correction, bool sqrt) {
  return [=](const std::vector<double>& v) {
    const double mean = RefMean(v);
    double ss = 0;
    for (double e : v) ss += (e - mean) * (e - mean);
    const double var = ss / std::max(0.0, v.size() - correction);
    return sqrt ? std::sqrt(var) : var;
  };
}
double RefLogSumExp(const std::vector<double>& v) {
  double m = -kInf;
  for (double e : v) m = std::max(m, e);
  if (std::isinf(m)) return m;
  double s = 0;
  for (double e : v) s += std::exp(e - m);
  return m + std::log(s);
}
double RefAll(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double e) { return e != 0; });
}
double RefAny(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double e) { return e != 0; });
}

TEST(Reduction, SumMatchesReferenceForEveryDtype) {
  for (DType dt : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool}) {
    for (const DimCase& c : ListCases()) {
      for (bool keepdim : {false, true}) {
        Tensor x = Random(dt, c.shape, 7, -10, 10);
        DType out = IsFloat(dt) ? dt : DType::kI64;
        ExpectReduction("sum", x, DimAttrs(c.dims, keepdim), c.dims, keepdim, RefSum, out);
      }
    }
  }
}

// Summing the dims around kept ones ([N, C, H, W] over N, H, W: a convolution's bias gradient)
// reads the input in place; the bits are those of summing the same values gathered into rows
// (the permuted input, summed over its trailing dims).
TEST(Reduction, SumAroundKeptDimsEqualsTheGatheredRowsBitForBit) {
  for (DType dt : {DType::kF32, DType::kF64, DType::kI32}) {
    for (const Shape& shape : {Shape{5, 3, 4, 6}, Shape{3, 4, 3, 3}, Shape{2, 1, 3, 2, 1, 7}}) {
      const std::vector<int64_t> dims =
          shape.size() == 4 ? std::vector<int64_t>{0, 2, 3} : std::vector<int64_t>{0, 3, 4, 5};
      Tensor x = Random(dt, shape, 11, -1000, 1000);
      const std::vector<int64_t> order = shape.size() == 4 ? std::vector<int64_t>{1, 0, 2, 3}
                                                           : std::vector<int64_t>{1, 2, 0, 3, 4, 5};
      Tensor rows = Run1("permute", {x}, {{"dims", order}});
      const std::vector<int64_t> tail =
          shape.size() == 4 ? std::vector<int64_t>{1, 2, 3} : std::vector<int64_t>{2, 3, 4, 5};
      for (const char* op : {"sum", "mean"}) {
        if (std::string(op) == "mean" && !IsFloat(dt)) continue;
        Tensor got = Run1(op, {x}, {{"dim", dims}});
        Tensor want = Run1(op, {rows}, {{"dim", tail}});
        ASSERT_EQ(got.shape(), want.shape()) << op;
        EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0)
            << op << " " << DTypeName(dt) << " " << ShapeToString(shape);
      }
    }
  }
}

TEST(Reduction, SumDtypeAttributeCastsFirst) {
  Tensor x = Values(DType::kF32, {4}, {1.5, 2.5, -1.7, 3});
  AttrMap to_int = {{"dtype", std::string("i64")}};
  // torch.sum(x, dtype=int64) casts each element before summing: 1 + 2 - 1 + 3.
  EXPECT_TRUE(AllClose(Run1("sum", {x}, to_int), {5}, 0, 0));
  Tensor i = Values(DType::kI32, {3}, {1, 2, 3});
  Tensor f = Run1("sum", {i}, {{"dtype", std::string("f64")}});
  EXPECT_EQ(f.dtype(), DType::kF64);
  EXPECT_TRUE(AllClose(f, {6}));
}

TEST(Reduction, SumAccumulatesInDoubleForF32) {
  // 1e7 ones plus many small values: single-precision accumulation would lose the small ones.
  std::vector<double> v(100001, 0.25);
  v[0] = 1e7;
  Tensor x = Values(DType::kF32, {static_cast<int64_t>(v.size())}, v);
  EXPECT_TRUE(AllClose(Run1("sum", {x}), {1e7 + 25000}, 1e-7, 0));
}

TEST(Reduction, MeanMatchesReferenceAndNaNWhenEmpty) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    for (const DimCase& c : ListCases()) {
      for (bool keepdim : {false, true}) {
        Tensor x = Random(dt, c.shape, 11, -3, 3);
        ExpectReduction("mean", x, DimAttrs(c.dims, keepdim), c.dims, keepdim, RefMean, dt);
      }
    }
  }
  Tensor empty = Random(DType::kF32, {0, 3}, 1);
  EXPECT_TRUE(AllClose(Run1("mean", {empty}), {kNaN}));
  EXPECT_TRUE(AllClose(Run1("mean", {empty}, {{"dim", int64_t{0}}}), {kNaN, kNaN, kNaN}));
}

TEST(Reduction, MeanOfIntegersNeedsAFloatDtype) {
  Tensor x = Values(DType::kI64, {2, 2}, {1, 2, 3, 5});
  auto bad = RunOp("mean", {x});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(GetReason(bad.status()), Reason::kDtypeMismatch);
  auto bad_dtype = RunOp("mean", {x}, {{"dtype", std::string("i32")}});
  EXPECT_EQ(GetReason(bad_dtype.status()), Reason::kDtypeMismatch);
  Tensor m = Run1("mean", {x}, {{"dtype", std::string("f32")}, {"dim", int64_t{1}}});
  EXPECT_EQ(m.dtype(), DType::kF32);
  EXPECT_TRUE(AllClose(m, {1.5, 4}));
  for (DType dt : {DType::kI32, DType::kI64}) {
    Tensor r = Random(dt, {3, 4, 2}, 5, -20, 20);
    ExpectReduction("mean", r, {{"dim", std::vector<int64_t>{0, 2}}, {"dtype", std::string("f64")}},
                    {0, 2}, false, RefMean, DType::kF64);
  }
}

TEST(Reduction, AMaxAMinMatchReference) {
  for (DType dt : {DType::kF32, DType::kF64, DType::kI32, DType::kI64}) {
    for (const DimCase& c : ListCases()) {
      if (NumElements(c.shape) == 0) continue;
      for (bool keepdim : {false, true}) {
        Tensor x = Random(dt, c.shape, 3, -50, 50);
        ExpectReduction("amax", x, DimAttrs(c.dims, keepdim), c.dims, keepdim, RefMax, dt);
        ExpectReduction("amin", x, DimAttrs(c.dims, keepdim), c.dims, keepdim, RefMin, dt);
      }
    }
  }
  // Reducing a non-empty dim of a tensor that is empty elsewhere gives an empty result.
  Tensor e = Random(DType::kF32, {0, 3}, 1);
  EXPECT_EQ(Run1("amax", {e}, {{"dim", int64_t{1}}}).shape(), (Shape{0}));
}

TEST(Reduction, MaxMinFullAndAlongDim) {
  for (DType dt : {DType::kF32, DType::kF64, DType::kI32, DType::kI64}) {
    for (Shape shape : {Shape{2, 3, 4}, Shape{7}, Shape{}, Shape{1, 5}}) {
      Tensor x = Random(dt, shape, 21, -100, 100);
      ExpectReduction("max", x, {}, {}, false, RefMax, dt);
      ExpectReduction("min", x, {}, {}, false, RefMin, dt);
      const int64_t rank = shape.size();
      for (int64_t dim = -std::max<int64_t>(rank, 1); dim < std::max<int64_t>(rank, 1); ++dim) {
        for (bool keepdim : {false, true}) {
          AttrMap a = {{"dim", dim}, {"keepdim", keepdim}};
          SCOPED_TRACE(ShapeToString(shape) + " dim " + std::to_string(dim));
          auto out = RunOp("max", {x}, a);
          ASSERT_TRUE(out.ok()) << out.status();
          ASSERT_EQ(out->size(), 2u);
          std::vector<int64_t> dims = rank ? std::vector<int64_t>{dim} : std::vector<int64_t>{};
          Groups g = GroupBy(x, dims, keepdim);
          std::vector<double> values, indices;
          for (const auto& v : g.values) {
            values.push_back(RefMax(v));
            indices.push_back(RefArgMax(v));
          }
          EXPECT_EQ((*out)[0].shape(), g.shape);
          EXPECT_EQ((*out)[1].dtype(), DType::kI64);
          EXPECT_TRUE(AllClose((*out)[0], values, 0, 0));
          EXPECT_TRUE(AllClose((*out)[1], indices, 0, 0));
          ExpectReduction("argmax", x, a, dims, keepdim, RefArgMax, DType::kI64);
          ExpectReduction("argmin", x, a, dims, keepdim, RefArgMin, DType::kI64);
          auto mn = RunOp("min", {x}, a);
          ASSERT_TRUE(mn.ok());
          std::vector<double> min_indices;
          for (const auto& v : g.values) min_indices.push_back(RefArgMin(v));
          EXPECT_TRUE(AllClose((*mn)[1], min_indices, 0, 0));
        }
      }
    }
  }
}

TEST(Reduction, ArgMaxWithoutDimIndexesTheFlattenedInput) {
  Tensor x = Values(DType::kF32, {2, 3}, {1, 9, 3, 9, 2, 0});
  Tensor a = Run1("argmax", {x});
  EXPECT_EQ(a.shape(), Shape{});
  EXPECT_TRUE(AllClose(a, {1}, 0, 0));  // first of the tied maxima
  EXPECT_TRUE(AllClose(Run1("argmin", {x}), {5}, 0, 0));
  // keepdim without dim keeps the rank with ones (torch >= 2.0).
  EXPECT_EQ(Run1("argmax", {x}, {{"keepdim", true}}).shape(), (Shape{1, 1}));
}

TEST(Reduction, NaNPropagatesThroughMaxAndIsSelectedByArgMax) {
  Tensor x = Values(DType::kF64, {2, 3}, {1, kNaN, 3, 4, 5, kNaN});
  EXPECT_TRUE(AllClose(Run1("amax", {x}, {{"dim", int64_t{1}}}), {kNaN, kNaN}));
  EXPECT_TRUE(AllClose(Run1("amin", {x}, {{"dim", int64_t{0}}}), {1, kNaN, kNaN}));
  EXPECT_TRUE(AllClose(Run1("argmax", {x}, {{"dim", int64_t{1}}}), {1, 2}, 0, 0));
  EXPECT_TRUE(AllClose(Run1("argmin", {x}), {1}, 0, 0));
  EXPECT_TRUE(AllClose(Run1("max", {x}), {kNaN}));
  // Long rows take the lane-parallel path; a NaN in any lane still wins.
  std::vector<double> row(21);
  for (int i = 0; i < 21; ++i) row[i] = i;
  row[11] = kNaN;
  Tensor long_row = Values(DType::kF32, {21}, row);
  EXPECT_TRUE(AllClose(Run1("amax", {long_row}), {kNaN}));
  EXPECT_TRUE(AllClose(Run1("min", {long_row}), {kNaN}));
  row[11] = 11;
  EXPECT_TRUE(AllClose(Run1("amax", {Values(DType::kF32, {21}, row)}), {20}));
  EXPECT_TRUE(AllClose(Run1("amin", {Values(DType::kF32, {21}, row)}), {0}));
}

TEST(Reduction, VarStdMatchReference) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    for (const DimCase& c : ListCases()) {
      for (double correction : {1.0, 0.0, 2.0}) {
        for (bool keepdim : {false, true}) {
          Tensor x = Random(dt, c.shape, 17, -4, 4);
          AttrMap a = DimAttrs(c.dims, keepdim);
          a["correction"] = correction;
          ExpectReduction("var", x, a, c.dims, keepdim, RefVar(correction, false), dt, 1e-4);
          ExpectReduction("std", x, a, c.dims, keepdim, RefVar(correction, true), dt, 1e-4);
        }
      }
    }
  }
}

TEST(Reduction, VarIsStableForLargeOffsetsAndAcceptsUnbiased) {
  // Values around 1e8 with unit spread: sum-of-squares formulas lose all digits in double.
  std::vector<double> v = {1e8 + 1, 1e8 + 2, 1e8 + 3, 1e8 + 4};
  Tensor x = Values(DType::kF64, {4}, v);
  EXPECT_TRUE(AllClose(Run1("var", {x}), {5.0 / 3.0}, 1e-9));
  EXPECT_TRUE(AllClose(Run1("var", {x}, {{"unbiased", false}}), {1.25}, 1e-9));
  auto both = RunOp("var", {x}, {{"unbiased", true}, {"correction", 1.0}});
  EXPECT_EQ(GetReason(both.status()), Reason::kBadAttribute);
  // One element with correction 1: 0 / 0.
  EXPECT_TRUE(AllClose(Run1("std", {Values(DType::kF32, {1}, {3})}), {kNaN}));
}

TEST(Reduction, LogSumExpMatchesReferenceAndIsStable) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    for (const DimCase& c : ListCases()) {
      for (bool keepdim : {false, true}) {
        Tensor x = Random(dt, c.shape, 23, -5, 5);
        ExpectReduction("logsumexp", x, DimAttrs(c.dims, keepdim), c.dims, keepdim, RefLogSumExp,
                        dt);
      }
    }
  }
  // exp(1000) overflows; the stable form does not.
  Tensor big = Values(DType::kF32, {3}, {1000, 1000, -kInf});
  EXPECT_TRUE(AllClose(Run1("logsumexp", {big}), {1000 + std::log(2.0)}));
  Tensor all_neg_inf = Values(DType::kF64, {2}, {-kInf, -kInf});
  EXPECT_TRUE(AllClose(Run1("logsumexp", {all_neg_inf}), {-kInf}));
  Tensor pos_inf = Values(DType::kF64, {3}, {1, kInf, kInf});
  EXPECT_TRUE(AllClose(Run1("logsumexp", {pos_inf}), {kInf}));
  EXPECT_TRUE(AllClose(Run1("logsumexp", {Values(DType::kF64, {2}, {kNaN, 1})}), {kNaN}));
}

TEST(Reduction, AllAnyAcceptEveryDtypeAndReturnBool) {
  for (DType dt : {DType::kBool, DType::kI32, DType::kI64, DType::kF32, DType::kF64}) {
    for (const DimCase& c : ListCases()) {
      for (bool keepdim : {false, true}) {
        // Mostly non-zero inputs so that `all` is true somewhere and false elsewhere.
        Tensor x = Random(dt, c.shape, 31, IsBool(dt) ? -0.6 : -1.2, IsBool(dt) ? 1.0 : 3);
        ExpectReduction("all", x, DimAttrs(c.dims, keepdim), c.dims, keepdim, RefAll, DType::kBool);
        ExpectReduction("any", x, DimAttrs(c.dims, keepdim), c.dims, keepdim, RefAny, DType::kBool);
      }
    }
  }
  Tensor empty = Random(DType::kBool, {0}, 1);
  EXPECT_TRUE(AllClose(Run1("all", {empty}), {1}, 0, 0));
  EXPECT_TRUE(AllClose(Run1("any", {empty}), {0}, 0, 0));
  EXPECT_TRUE(AllClose(Run1("all", {Values(DType::kF32, {2}, {kNaN, 1})}), {1}, 0, 0));
}

TEST(Reduction, EmptySumIsZero) {
  Tensor x = Random(DType::kF32, {0, 4}, 1);
  EXPECT_TRUE(AllClose(Run1("sum", {x}), {0}));
  Tensor by_dim = Run1("sum", {x}, {{"dim", int64_t{0}}});
  EXPECT_EQ(by_dim.shape(), (Shape{4}));
  EXPECT_TRUE(AllClose(by_dim, {0, 0, 0, 0}));
  EXPECT_TRUE(
      AllClose(Run1("logsumexp", {x}, {{"dim", int64_t{0}}}), {-kInf, -kInf, -kInf, -kInf}));
}

TEST(Reduction, ReductionsWithoutIdentityRefuseEmptyDims) {
  Tensor x = Random(DType::kF32, {3, 0}, 1);
  struct Case {
    std::string op;
    AttrMap attrs;
  };
  for (const Case& c : std::vector<Case>{{"max", {}},
                                         {"min", {}},
                                         {"max", {{"dim", int64_t{1}}}},
                                         {"amax", {}},
                                         {"amin", {{"dim", int64_t{-1}}}},
                                         {"argmax", {}},
                                         {"argmin", {{"dim", int64_t{1}}}}}) {
    auto out = RunOp(c.op, {x}, c.attrs);
    ASSERT_FALSE(out.ok()) << c.op;
    EXPECT_EQ(GetReason(out.status()), Reason::kShapeMismatch) << c.op;
    EXPECT_NE(out.status().message().find("cannot reduce over an empty dimension"),
              std::string::npos)
        << out.status();
  }
  // Reducing the non-empty dim is fine: an empty result.
  EXPECT_EQ(Run1("argmax", {x}, {{"dim", int64_t{0}}}).shape(), (Shape{0}));
}

TEST(Reduction, BadDimsAreBadAttributes) {
  Tensor x = Random(DType::kF32, {2, 3}, 1);
  for (const std::string op : {"sum", "mean", "amax", "var", "std", "logsumexp", "all", "any"}) {
    auto out = RunOp(op, {x}, {{"dim", int64_t{2}}});
    ASSERT_FALSE(out.ok()) << op;
    EXPECT_EQ(GetReason(out.status()), Reason::kBadAttribute) << op;
    EXPECT_EQ(GetMetadata(out.status()).at("op"), op);
    auto repeated = RunOp(op, {x}, {{"dim", std::vector<int64_t>{1, -1}}});
    EXPECT_EQ(GetReason(repeated.status()), Reason::kBadAttribute) << op;
  }
  for (const std::string op : {"max", "min", "argmax", "argmin"}) {
    EXPECT_EQ(GetReason(RunOp(op, {x}, {{"dim", int64_t{-3}}}).status()), Reason::kBadAttribute);
    // A single int, not a list, as in PyTorch.
    EXPECT_EQ(GetReason(RunOp(op, {x}, {{"dim", std::vector<int64_t>{0, 1}}}).status()),
              Reason::kBadAttribute);
  }
  EXPECT_EQ(GetReason(RunOp("max", {x}, {{"keepdim", true}}).status()), Reason::kBadAttribute);
}

TEST(Reduction, DtypeRulesFollowTheTable) {
  Tensor b = Random(DType::kBool, {3}, 1);
  for (const std::string op : {"mean", "max", "amax", "argmax", "var", "logsumexp"}) {
    EXPECT_EQ(GetReason(RunOp(op, {b}).status()), Reason::kDtypeMismatch) << op;
  }
  Tensor i = Random(DType::kI32, {3}, 1, -5, 5);
  for (const std::string op : {"var", "std", "logsumexp"}) {
    EXPECT_EQ(GetReason(RunOp(op, {i}).status()), Reason::kDtypeMismatch) << op;
  }
}

}  // namespace
}  // namespace tensord
