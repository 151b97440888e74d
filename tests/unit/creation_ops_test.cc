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

// torch.arange(5) is i64 but torch.arange(5.0), arange(0, 5, 1.0) and arange(0.0, 5) are f32:
// the default dtype follows how the numbers were given, not whether their values are whole.
TEST(CreationOps, ArangeDefaultDtypeFollowsTheGivenNumbers) {
  struct Case {
    AttrMap attrs;
    DType dtype;
  };
  const std::vector<Case> cases = {
      {{{"end", int64_t{5}}}, DType::kI64},
      {{{"end", 5.0}}, DType::kF32},
      {{{"start", 0.0}, {"end", int64_t{5}}}, DType::kF32},
      {{{"end", int64_t{5}}, {"step", 1.0}}, DType::kF32},
      {{{"start", int64_t{0}}, {"end", int64_t{5}}, {"step", int64_t{1}}}, DType::kI64},
      {{{"end", 5.0}, {"dtype", std::string("i32")}}, DType::kI32},
      {{{"end", int64_t{5}}, {"dtype", std::string("f64")}}, DType::kF64},
  };
  for (const Case& c : cases) {
    Tensor a = Create("arange", c.attrs);
    EXPECT_EQ(a.dtype(), c.dtype) << AttrValueToString(c.attrs.at("end"));
    EXPECT_TRUE(SameValues(a, {5}, {0, 1, 2, 3, 4}));
  }
  // The value survives as given: a large integer end is not rounded through a double.
  Tensor big =
      Create("arange", {{"start", int64_t{9007199254740993}}, {"end", int64_t{9007199254740995}}});
  EXPECT_EQ(big.dtype(), DType::kI64);
  ASSERT_EQ(big.numel(), 2);
  EXPECT_EQ(big.data<int64_t>()[0], int64_t{9007199254740993});
  EXPECT_EQ(big.data<int64_t>()[1], int64_t{9007199254740994});
  // The whole i64 range has a length too large for any tensor, not an overflow.
  EXPECT_EQ(ReasonOf(RunOp("arange", {}, {{"start", INT64_MIN}, {"end", INT64_MAX}})),
            Reason::kLimitExceeded);
  Tensor down =
      Create("arange", {{"start", INT64_MAX}, {"end", INT64_MAX - 7}, {"step", int64_t{-3}}});
  ASSERT_EQ(down.numel(), 3);
  EXPECT_EQ(down.data<int64_t>()[2], INT64_MAX - 6);
  // The attribute keeps its type in the validated attributes, for kernels and ListOps alike.
  auto def = OpRegistry::Builtin().Find("arange");
  ASSERT_TRUE(def.ok());
  auto attrs = ValidateAttrs("arange", (*def)->attrs, {{"end", 5.0}});
  ASSERT_TRUE(attrs.ok());
  EXPECT_TRUE(std::holds_alternative<double>(attrs->map().at("end")));
  EXPECT_TRUE(attrs->HoldsInt("start"));
  EXPECT_EQ(attrs->GetNumber("end"), 5.0);
}

TEST(CreationOps, PyTorchAttributeNamesAreAliases) {
  // torch.full_like(x, fill_value=...), torch.ones(size=...): the same call as tensord's names.
  Tensor x = Random(DType::kF32, {2, 3}, 1);
  Tensor a = Run1("full_like", {x}, {{"fill_value", 2.5}});
  EXPECT_TRUE(AllClose(a, Run1("full_like", {x}, {{"value", 2.5}}), 0, 0));
  Tensor o = Run1("ones", {}, {{"size", std::vector<int64_t>{4}}});
  EXPECT_EQ(o.shape(), (Shape{4}));
  EXPECT_TRUE(AllClose(o, {1, 1, 1, 1}, 0, 0));
  // Naming one attribute twice is refused, whichever spelling comes first.
  auto both = RunOp("full_like", {x}, {{"value", 1.0}, {"fill_value", 2.0}});
  EXPECT_EQ(ReasonOf(both), Reason::kBadAttribute);
  EXPECT_NE(std::string(both.status().message()).find("given twice"), std::string::npos)
      << both.status();
  // ListOps shows the alias with its attribute.
  auto def = OpRegistry::Builtin().Find("full_like");
  ASSERT_TRUE(def.ok());
  bool listed = false;
  for (const AttrSpec& spec : (*def)->attrs) {
    listed |= spec.name == "value" && spec.aliases == std::vector<std::string>{"fill_value"};
  }
  EXPECT_TRUE(listed);
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
  EXPECT_EQ(
      reason({{"start", -1e30}, {"end", 1e30}, {"step", 1e29}, {"dtype", std::string("i64")}}),
      Reason::kBadAttribute);
  EXPECT_EQ(reason({{"end", std::string("5")}}), Reason::kBadAttribute);  // not a number
  EXPECT_EQ(reason({{"end", NAN}}), Reason::kBadAttribute);
  EXPECT_TRUE(SameValues(
      Create("arange",
             {{"start", -1e30}, {"end", 1e30}, {"step", 1e30}, {"dtype", std::string("f64")}}),
      {2}, {-1e30, 0}));
}

TEST(CreationOps, EyeEveryDtype) {
  for (DType d : {DType::kF32, DType::kF64, DType::kI32, DType::kI64}) {
    const std::string name(DTypeName(d));
    for (const auto& [n, m] :
         std::vector<std::pair<int64_t, int64_t>>{{3, 3}, {2, 4}, {4, 2}, {0, 2}, {1, 1}, {3, 0}}) {
      Tensor e = Create("eye", {{"n", n}, {"m", m}, {"dtype", name}});
      EXPECT_EQ(e.dtype(), d);
      EXPECT_TRUE(SameValues(
          e, {n, m}, Expected({n, m}, [](const Shape& i) { return i[0] == i[1] ? 1.0 : 0.0; })));
    }
  }
  // m defaults to n, dtype to f32.
  Tensor e = Create("eye", {{"n", int64_t{3}}});
  EXPECT_EQ(e.dtype(), DType::kF32);
  EXPECT_TRUE(SameValues(e, {3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1}));
  auto reason = [](const AttrMap& attrs) { return ReasonOf(RunOp("eye", {}, attrs)); };
  EXPECT_EQ(reason({{"n", int64_t{-1}}}), Reason::kBadAttribute);
  EXPECT_EQ(reason({{"n", int64_t{2}}, {"m", int64_t{-3}}}), Reason::kBadAttribute);
  EXPECT_EQ(reason({}), Reason::kBadAttribute);  // n is required
  EXPECT_EQ(reason({{"n", 2.5}}), Reason::kBadAttribute);
  EXPECT_EQ(reason({{"n", int64_t{2}}, {"dtype", std::string("bool")}}), Reason::kDtypeMismatch);
  EXPECT_EQ(reason({{"n", int64_t{1} << 40}}), Reason::kLimitExceeded);
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
  // A range of 2^63 + 1 rejects about half the stream's values; each element redraws on its
  // own, so a longer draw of the same seed starts with the shorter one, and every element of
  // the upper half (beyond the first bucket) is still drawn.
  const int64_t quarter = int64_t{1} << 62;
  auto wide = [&](int64_t n) {
    return Create(
        "randint",
        {{"low", -quarter}, {"high", quarter + 1}, {"shape", Ints{n}}, {"seed", int64_t{3}}});
  };
  const Tensor shorter = wide(400), longer = wide(1000);
  int upper = 0;
  for (int64_t i = 0; i < 400; ++i) {
    const int64_t v = shorter.data<int64_t>()[i];
    ASSERT_EQ(v, longer.data<int64_t>()[i]) << i;
    ASSERT_GE(v, -quarter);
    ASSERT_LE(v, quarter);
    upper += v > 0;
  }
  EXPECT_NEAR(upper, 200, 50);
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
