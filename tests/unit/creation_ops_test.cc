// Creation ops: fills, arange (torch's dtype and length rules), and the seeded random ops.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/shape_test_util.h"

namespace tensord {
namespace {
using namespace testing;
using Ints = std::vector<int64_t>;

Tensor Create(const std::string& op, const AttrMap& attrs) { return Run1(op, {}, attrs); }

TEST(CreationOps, FillsEveryDtype) {
  for (DType d : kEveryDType) {
    const std::string name(DTypeName(d));
    for (const Shape& shape : {Shape{2, 3}, Shape{}, Shape{0, 2}}) {
      const int64_t n = NumElements(shape);
      EXPECT_TRUE(SameValues(Create("zeros", {{"shape", shape}, {"dtype", name}}), shape,
                             std::vector<double>(n, 0)));
      EXPECT_TRUE(SameValues(Create("ones", {{"shape", shape}, {"dtype", name}}), shape,
                             std::vector<double>(n, 1)));
      const double v = IsBool(d) ? 1 : 3;
      EXPECT_TRUE(SameValues(Create("full", {{"shape", shape}, {"dtype", name}, {"value", v}}),
                             shape, std::vector<double>(n, v)));
      Tensor like = Sample(d, shape, 1);
      Tensor z = Run1("zeros_like", {like});
      EXPECT_EQ(z.dtype(), d);
      EXPECT_TRUE(SameValues(z, shape, std::vector<double>(n, 0)));
      EXPECT_TRUE(
          SameValues(Run1("full_like", {like}, {{"value", v}}), shape, std::vector<double>(n, v)));
    }
  }
  EXPECT_EQ(Create("zeros", {{"shape", Ints{2}}}).dtype(), DType::kF32);
  EXPECT_EQ(ReasonOf(RunOp("zeros", {}, {{"shape", Ints{-1}}})), Reason::kShapeMismatch);
}

TEST(CreationOps, ArangeValuesAndDefaultDtype) {
  Tensor a = Create("arange", {{"end", int64_t{5}}});
  EXPECT_EQ(a.dtype(), DType::kI64);
  EXPECT_TRUE(SameValues(a, {5}, {0, 1, 2, 3, 4}));
  a = Create("arange", {{"start", int64_t{2}}, {"end", int64_t{-7}}, {"step", int64_t{-3}}});
  EXPECT_EQ(a.dtype(), DType::kI64);
  EXPECT_TRUE(SameValues(a, {3}, {2, -1, -4}));
  a = Create("arange", {{"start", 0.0}, {"end", 1.0}, {"step", 0.25}});
  EXPECT_EQ(a.dtype(), DType::kF32);
  EXPECT_TRUE(SameValues(a, {4}, {0, 0.25, 0.5, 0.75}));
  // ceil((end - start) / step) elements: 1, 1.3, 1.6, 1.9 (2.2 is past the end).
  a = Create("arange",
             {{"start", 1.0}, {"end", 2.15}, {"step", 0.3}, {"dtype", std::string("f64")}});
  EXPECT_EQ(a.dtype(), DType::kF64);
  EXPECT_TRUE(AllClose(a, {1, 1.3, 1.6, 1.9}, 0, 1e-12));
  EXPECT_EQ(a.numel(), 4);
  // Integer outputs truncate start and step first, like torch.
  a = Create("arange", {{"end", 5.0}, {"step", 1.5}, {"dtype", std::string("i64")}});
  EXPECT_TRUE(SameValues(a, {4}, {0, 1, 2, 3}));
  a = Create("arange", {{"start", int64_t{1}}, {"end", int64_t{4}}, {"dtype", std::string("f64")}});
  EXPECT_TRUE(SameValues(a, {3}, {1, 2, 3}));
  a = Create("arange", {{"end", int64_t{4}}, {"dtype", std::string("i32")}});
  EXPECT_EQ(a.dtype(), DType::kI32);
  EXPECT_TRUE(SameValues(a, {4}, {0, 1, 2, 3}));
  EXPECT_TRUE(SameValues(Create("arange", {{"start", int64_t{3}}, {"end", int64_t{3}}}), {0}, {}));
}

TEST(CreationOps, ArangeErrors) {
  auto reason = [](const AttrMap& attrs) { return ReasonOf(RunOp("arange", {}, attrs)); };
  EXPECT_EQ(reason({{"end", int64_t{5}}, {"step", int64_t{0}}}), Reason::kBadAttribute);
  EXPECT_EQ(reason({{"end", int64_t{5}}, {"step", int64_t{-1}}}), Reason::kBadAttribute);
  EXPECT_EQ(reason({{"start", int64_t{5}}, {"end", int64_t{0}}}), Reason::kBadAttribute);
  EXPECT_EQ(reason({{"end", INFINITY}}), Reason::kBadAttribute);
  EXPECT_EQ(reason({}), Reason::kBadAttribute);  // end is required
  EXPECT_EQ(reason({{"end", int64_t{3}}, {"dtype", std::string("bool")}}), Reason::kDtypeMismatch);
  EXPECT_EQ(reason({{"end", 1e300}, {"step", 1e-300}}), Reason::kLimitExceeded);
  EXPECT_EQ(reason({{"start", -1e30}, {"end", 1e30}, {"step", 1e29}}), Reason::kBadAttribute);
  EXPECT_TRUE(SameValues(
      Create("arange",
             {{"start", -1e30}, {"end", 1e30}, {"step", 1e30}, {"dtype", std::string("f64")}}),
      {2}, {-1e30, 0}));
}

TEST(CreationOps, RandIsUniformAndSeeded) {
  for (DType d : {DType::kF32, DType::kF64}) {
    const AttrMap attrs = {
        {"shape", Ints{100, 50}}, {"dtype", std::string(DTypeName(d))}, {"seed", int64_t{42}}};
    Tensor a = Create("rand", attrs);
    Tensor b = Create("rand", attrs);
    EXPECT_EQ(a.dtype(), d);
    EXPECT_EQ(a.shape(), (Shape{100, 50}));
    EXPECT_TRUE(AllClose(a, b, 0, 0));  // same seed, same values
    double sum = 0, lo = 1, hi = 0;
    for (double v : a.ToDoubles()) {
      sum += v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    EXPECT_GE(lo, 0.0);
    EXPECT_LT(hi, 1.0);
    EXPECT_NEAR(sum / a.numel(), 0.5, 0.02);  // 5000 samples: sd of the mean ~0.004
    AttrMap other = attrs;
    other["seed"] = int64_t{43};
    EXPECT_FALSE(AllClose(Create("rand", other), a, 0, 0));
  }
  // Without a seed each call draws a fresh stream.
  Tensor a = Create("rand", {{"shape", Ints{64}}});
  Tensor b = Create("rand", {{"shape", Ints{64}}});
  EXPECT_FALSE(AllClose(a, b, 0, 0));
  EXPECT_EQ(Create("rand", {{"shape", Ints{0, 3}}}).numel(), 0);
  EXPECT_EQ(Create("rand", {{"shape", Ints{}}}).shape(), Shape{});
  EXPECT_EQ(ReasonOf(RunOp("rand", {}, {{"shape", Ints{2}}, {"dtype", std::string("i64")}})),
            Reason::kDtypeMismatch);
}

TEST(CreationOps, RandnMoments) {
  for (DType d : {DType::kF32, DType::kF64}) {
    const AttrMap attrs = {
        {"shape", Ints{20001}}, {"dtype", std::string(DTypeName(d))}, {"seed", int64_t{7}}};
    Tensor a = Create("randn", attrs);
    EXPECT_TRUE(AllClose(Create("randn", attrs), a, 0, 0));
    double sum = 0, sq = 0;
    for (double v : a.ToDoubles()) {
      ASSERT_TRUE(std::isfinite(v));
      sum += v;
      sq += v * v;
    }
    const double mean = sum / a.numel();
    EXPECT_NEAR(mean, 0.0, 0.03);
    EXPECT_NEAR(sq / a.numel() - mean * mean, 1.0, 0.05);
  }
  EXPECT_EQ(ReasonOf(RunOp("randn", {}, {{"shape", Ints{2}}, {"dtype", std::string("bool")}})),
            Reason::kDtypeMismatch);
}

TEST(CreationOps, RandintRangeAndDtypes) {
  for (DType d : {DType::kI64, DType::kI32, DType::kF32, DType::kF64}) {
    const AttrMap attrs = {{"low", int64_t{-3}},
                           {"high", int64_t{4}},
                           {"shape", Ints{7000}},
                           {"dtype", std::string(DTypeName(d))},
                           {"seed", int64_t{1}}};
    Tensor a = Create("randint", attrs);
    EXPECT_EQ(a.dtype(), d);
    EXPECT_TRUE(AllClose(Create("randint", attrs), a, 0, 0));
    std::vector<int> counts(7, 0);
    for (double v : a.ToDoubles()) {
      ASSERT_EQ(v, std::floor(v));
      ASSERT_GE(v, -3);
      ASSERT_LT(v, 4);
      ++counts[static_cast<int>(v) + 3];
    }
    for (int c : counts) EXPECT_NEAR(c, 1000, 150);  // every value drawn about equally
  }
  Tensor a = Create("randint", {{"high", int64_t{2}}, {"shape", Ints{3}}});
  EXPECT_EQ(a.dtype(), DType::kI64);
  auto reason = [](const AttrMap& attrs) { return ReasonOf(RunOp("randint", {}, attrs)); };
  EXPECT_EQ(reason({{"low", int64_t{2}}, {"high", int64_t{2}}, {"shape", Ints{1}}}),
            Reason::kBadAttribute);
  EXPECT_EQ(reason({{"shape", Ints{1}}}), Reason::kBadAttribute);  // high is required
  EXPECT_EQ(reason({{"high", int64_t{1} << 40}, {"shape", Ints{1}}, {"dtype", std::string("i32")}}),
            Reason::kBadAttribute);
  EXPECT_EQ(reason({{"high", int64_t{2}}, {"shape", Ints{1}}, {"dtype", std::string("bool")}}),
            Reason::kDtypeMismatch);
}

}  // namespace
}  // namespace tensord
