// cat, stack, split, chunk, narrow and slice for every dtype, against index-walk references,
// with negative dims, empty and 0-d tensors, promotion, multi-output counts and errors.
#include <gtest/gtest.h>

#include <limits>

#include "tests/unit/shape_test_util.h"

namespace tensord {
namespace {
using namespace testing;
using Ints = std::vector<int64_t>;

// Reference for a range along `dim`: output index i reads input index start + i * step.
std::vector<double> RangeReference(const Tensor& x, int64_t dim, int64_t start, int64_t step,
                                   const Shape& out) {
  return Expected(out, [&](const Shape& i) {
    Shape j = i;
    j[dim] = start + i[dim] * step;
    return At(x, j);
  });
}

// Reference for cat: find the input whose range along `dim` holds the output index.
std::vector<double> CatReference(const std::vector<Tensor>& xs, int64_t dim, const Shape& out) {
  return Expected(out, [&](const Shape& i) {
    int64_t at = i[dim];
    for (const Tensor& x : xs) {
      if (x.rank() == 1 && x.dim(0) == 0) continue;
      if (at < x.dim(dim)) {
        Shape j = i;
        j[dim] = at;
        return At(x, j);
      }
      at -= x.dim(dim);
    }
    return -1.0;
  });
}

TEST(ShapeJoinOps, CatEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    std::vector<Tensor> xs = {Sample(d, {2, 3, 4}, 1), Sample(d, {2, 1, 4}, 2),
                              Sample(d, {2, 0, 4}, 3), Sample(d, {2, 2, 4}, 4)};
    for (int64_t dim : {int64_t{1}, int64_t{-2}}) {
      EXPECT_TRUE(
          SameValues(Run1("cat", xs, {{"dim", dim}}), {2, 6, 4}, CatReference(xs, 1, {2, 6, 4})));
    }
    std::vector<Tensor> rows = {Sample(d, {1, 3}, 5), Sample(d, {2, 3}, 6)};
    EXPECT_TRUE(SameValues(Run1("cat", rows), {3, 3}, CatReference(rows, 0, {3, 3})));
    std::vector<Tensor> cols = {Sample(d, {2, 1}, 7), Sample(d, {2, 3}, 8)};
    EXPECT_TRUE(SameValues(Run1("cat", cols, {{"dim", int64_t{-1}}}), {2, 4},
                           CatReference(cols, 1, {2, 4})));
    // One input is a copy; legacy 1-d empty tensors are skipped whatever their rank.
    EXPECT_TRUE(SameValues(Run1("cat", {rows[1]}), {2, 3}, rows[1].ToDoubles()));
    std::vector<Tensor> legacy = {Sample(d, {0}, 9), rows[0], Sample(d, {0}, 9)};
    EXPECT_TRUE(SameValues(Run1("cat", legacy), {1, 3}, rows[0].ToDoubles()));
    EXPECT_TRUE(SameValues(Run1("cat", {Sample(d, {0}, 1), Sample(d, {0}, 2)}), {0}, {}));
  }
}

TEST(ShapeJoinOps, CatPromotesLikeTorch) {
  Tensor i = Values(DType::kI32, {2}, {1, 2});
  Tensor f = Values(DType::kF64, {1}, {0.5});
  Tensor b = Values(DType::kBool, {1}, {1});
  Tensor out = Run1("cat", {i, f});
  EXPECT_EQ(out.dtype(), DType::kF64);
  EXPECT_TRUE(SameValues(out, {3}, {1, 2, 0.5}));
  out = Run1("cat", {b, i});
  EXPECT_EQ(out.dtype(), DType::kI32);
  EXPECT_TRUE(SameValues(out, {3}, {1, 1, 2}));
  EXPECT_EQ(Run1("cat", {Values(DType::kI64, {1}, {1}), i}).dtype(), DType::kI64);
}

TEST(ShapeJoinOps, CatErrors) {
  Tensor a = Sample(DType::kF32, {2, 3}, 1);
  EXPECT_EQ(ReasonOf(RunOp("cat", {a, Sample(DType::kF32, {2, 4}, 2)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("cat", {a, Sample(DType::kF32, {2, 3, 1}, 2)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("cat", {a, Sample(DType::kF32, {}, 2)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("cat", {a, a}, {{"dim", int64_t{2}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("cat", {})), Reason::kWrongArity);
}

TEST(ShapeJoinOps, StackEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    std::vector<Tensor> xs = {Sample(d, {2, 3}, 1), Sample(d, {2, 3}, 2), Sample(d, {2, 3}, 3)};
    for (int64_t dim : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{-1}, int64_t{-3}}) {
      const int64_t nd = dim < 0 ? dim + 3 : dim;
      Shape out = {2, 3};
      out.insert(out.begin() + nd, 3);
      auto want = Expected(out, [&](const Shape& i) {
        Shape j = i;
        j.erase(j.begin() + nd);
        return At(xs[i[nd]], j);
      });
      EXPECT_TRUE(SameValues(Run1("stack", xs, {{"dim", dim}}), out, want)) << dim;
    }
    std::vector<Tensor> scalars = {Sample(d, {}, 4), Sample(d, {}, 5)};
    EXPECT_TRUE(SameValues(Run1("stack", scalars), {2},
                           {scalars[0].ToDoubles()[0], scalars[1].ToDoubles()[0]}));
    EXPECT_TRUE(
        SameValues(Run1("stack", {Sample(d, {0, 2}, 1)}, {{"dim", int64_t{1}}}), {0, 1, 2}, {}));
  }
  Tensor a = Sample(DType::kF32, {2, 3}, 1);
  EXPECT_EQ(ReasonOf(RunOp("stack", {a, Sample(DType::kF32, {3, 2}, 2)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("stack", {a, a}, {{"dim", int64_t{3}}})), Reason::kBadAttribute);
  EXPECT_EQ(Run1("stack", {a, Values(DType::kF64, {2, 3}, {1, 2, 3, 4, 5, 6})}).dtype(),
            DType::kF64);
}

// Checks that `op` returns pieces of `sizes` along `dim` holding consecutive ranges of x.
void ExpectPieces(const std::string& op, const Tensor& x, const AttrMap& attrs, int64_t dim,
                  const Ints& sizes) {
  auto out = RunOp(op, {x}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), sizes.size());
  int64_t at = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    Shape shape = x.shape();
    shape[dim] = sizes[k];
    EXPECT_TRUE(SameValues((*out)[k], shape, RangeReference(x, dim, at, 1, shape))) << k;
    at += sizes[k];
  }
}

TEST(ShapeJoinOps, SplitEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = Sample(d, {7, 4}, 1);
    ExpectPieces("split", x, {{"split_size", int64_t{3}}}, 0, {3, 3, 1});
    ExpectPieces("split", x, {{"split_size", int64_t{7}}}, 0, {7});
    ExpectPieces("split", x, {{"split_size", int64_t{10}}}, 0, {7});
    ExpectPieces("split", x, {{"split_size", int64_t{2}}, {"dim", int64_t{-1}}}, 1, {2, 2});
    ExpectPieces("split", x, {{"split_size", Ints{2, 0, 5}}}, 0, {2, 0, 5});
    ExpectPieces("split", x, {{"split_size", Ints{1, 3}}, {"dim", int64_t{1}}}, 1, {1, 3});
    ExpectPieces("split", Sample(d, {0, 2}, 2), {{"split_size", int64_t{2}}}, 0, {0});
    ExpectPieces("split", Sample(d, {0, 2}, 2), {{"split_size", int64_t{0}}}, 0, {0});
  }
  Tensor x = Sample(DType::kF32, {6}, 1);
  EXPECT_EQ(ReasonOf(RunOp("split", {x}, {{"split_size", Ints{2, 3}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("split", {x}, {{"split_size", Ints{7, -1}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("split", {x}, {{"split_size", int64_t{0}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("split", {x}, {{"split_size", int64_t{-2}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("split", {x}, {{"split_size", int64_t{2}}, {"dim", int64_t{1}}})),
            Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("split", {Sample(DType::kF32, {}, 1)}, {{"split_size", int64_t{1}}})),
            Reason::kShapeMismatch);
}

TEST(ShapeJoinOps, ChunkEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = Sample(d, {3, 5}, 3);
    ExpectPieces("chunk", x, {{"chunks", int64_t{4}}, {"dim", int64_t{1}}}, 1, {2, 2, 1});
    ExpectPieces("chunk", x, {{"chunks", int64_t{5}}, {"dim", int64_t{-1}}}, 1, {1, 1, 1, 1, 1});
    ExpectPieces("chunk", x, {{"chunks", int64_t{3}}}, 0, {1, 1, 1});
    ExpectPieces("chunk", x, {{"chunks", int64_t{8}}}, 0, {1, 1, 1});
    ExpectPieces("chunk", x, {{"chunks", int64_t{1}}}, 0, {3});
    ExpectPieces("chunk", Sample(d, {0, 2}, 4), {{"chunks", int64_t{3}}}, 0, {0, 0, 0});
  }
  Tensor x = Sample(DType::kF32, {4}, 1);
  EXPECT_EQ(ReasonOf(RunOp("chunk", {x}, {{"chunks", int64_t{0}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("chunk", {x}, {{"chunks", int64_t{2}}, {"dim", int64_t{-2}}})),
            Reason::kBadAttribute);
}

TEST(ShapeJoinOps, NarrowEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = Sample(d, {4, 6}, 5);
    auto narrow = [&](int64_t dim, int64_t start, int64_t length) {
      return Run1("narrow", {x}, {{"dim", dim}, {"start", start}, {"length", length}});
    };
    EXPECT_TRUE(SameValues(narrow(1, 2, 3), {4, 3}, RangeReference(x, 1, 2, 1, {4, 3})));
    EXPECT_TRUE(SameValues(narrow(-2, 1, 2), {2, 6}, RangeReference(x, 0, 1, 1, {2, 6})));
    EXPECT_TRUE(SameValues(narrow(1, -2, 2), {4, 2}, RangeReference(x, 1, 4, 1, {4, 2})));
    EXPECT_TRUE(SameValues(narrow(0, 4, 0), {0, 6}, {}));
    EXPECT_TRUE(SameValues(narrow(0, 0, 4), {4, 6}, x.ToDoubles()));
  }
  Tensor x = Sample(DType::kF32, {4}, 1);
  auto reason = [&](int64_t dim, int64_t start, int64_t length) {
    return ReasonOf(RunOp("narrow", {x}, {{"dim", dim}, {"start", start}, {"length", length}}));
  };
  EXPECT_EQ(reason(0, 3, 2), Reason::kBadAttribute);
  EXPECT_EQ(reason(0, 5, 0), Reason::kBadAttribute);
  EXPECT_EQ(reason(0, -5, 1), Reason::kBadAttribute);
  EXPECT_EQ(reason(0, 0, -1), Reason::kBadAttribute);
  EXPECT_EQ(reason(0, 2, std::numeric_limits<int64_t>::max()), Reason::kBadAttribute);
  EXPECT_EQ(reason(1, 0, 1), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("narrow", {Sample(DType::kF32, {}, 1)},
                           {{"dim", int64_t{0}}, {"start", int64_t{0}}, {"length", int64_t{1}}})),
            Reason::kShapeMismatch);
}

TEST(ShapeJoinOps, SliceEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = Sample(d, {3, 10}, 6);
    auto slice = [&](AttrMap attrs) { return Run1("slice", {x}, attrs); };
    EXPECT_TRUE(SameValues(slice({}), {3, 10}, x.ToDoubles()));
    EXPECT_TRUE(SameValues(slice({{"dim", int64_t{1}}, {"start", int64_t{2}}, {"end", int64_t{7}}}),
                           {3, 5}, RangeReference(x, 1, 2, 1, {3, 5})));
    EXPECT_TRUE(
        SameValues(slice({{"dim", int64_t{-1}}, {"start", int64_t{1}}, {"step", int64_t{3}}}),
                   {3, 3}, RangeReference(x, 1, 1, 3, {3, 3})));
    // Python clamping: x[:, -3:] and x[:, -100:4:2] and x[:, 8:100].
    EXPECT_TRUE(SameValues(slice({{"dim", int64_t{1}}, {"start", int64_t{-3}}}), {3, 3},
                           RangeReference(x, 1, 7, 1, {3, 3})));
    EXPECT_TRUE(SameValues(slice({{"dim", int64_t{1}},
                                  {"start", int64_t{-100}},
                                  {"end", int64_t{4}},
                                  {"step", int64_t{2}}}),
                           {3, 2}, RangeReference(x, 1, 0, 2, {3, 2})));
    EXPECT_TRUE(
        SameValues(slice({{"dim", int64_t{1}}, {"start", int64_t{8}}, {"end", int64_t{100}}}),
                   {3, 2}, RangeReference(x, 1, 8, 1, {3, 2})));
    EXPECT_TRUE(SameValues(slice({{"dim", int64_t{1}}, {"start", int64_t{6}}, {"end", int64_t{2}}}),
                           {3, 0}, {}));
    EXPECT_TRUE(SameValues(slice({{"end", int64_t{-1}}, {"step", int64_t{5}}}), {1, 10},
                           RangeReference(x, 0, 0, 5, {1, 10})));
    EXPECT_TRUE(
        SameValues(Run1("slice", {Sample(d, {0, 3}, 7)}, {{"start", int64_t{1}}}), {0, 3}, {}));
    // Huge bounds and steps clamp without overflowing.
    const int64_t kMax = std::numeric_limits<int64_t>::max();
    const int64_t kMin = std::numeric_limits<int64_t>::min();
    EXPECT_TRUE(
        SameValues(slice({{"dim", int64_t{1}}, {"start", kMin}, {"end", kMax}, {"step", kMax}}),
                   {3, 1}, RangeReference(x, 1, 0, 1, {3, 1})));
  }
  Tensor x = Sample(DType::kF32, {4}, 1);
  EXPECT_EQ(ReasonOf(RunOp("slice", {x}, {{"step", int64_t{0}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("slice", {x}, {{"step", int64_t{-1}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("slice", {x}, {{"dim", int64_t{1}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("slice", {Sample(DType::kF32, {}, 1)}, {})), Reason::kShapeMismatch);
}

TEST(ShapeJoinOps, InternalSliceBackwardIsHidden) {
  auto def = OpRegistry::Builtin().Find("slice_backward");
  ASSERT_TRUE(def.ok());
  EXPECT_TRUE((*def)->internal);
  // Places the gradient at start, start + step, ... of a zero tensor.
  Tensor g = Values(DType::kF64, {2, 2}, {1, 2, 3, 4});
  Tensor out = Run1(
      "slice_backward", {g},
      {{"dim", int64_t{1}}, {"start", int64_t{1}}, {"step", int64_t{2}}, {"size", int64_t{5}}});
  EXPECT_TRUE(SameValues(out, {2, 5}, {0, 1, 0, 2, 0, 0, 3, 0, 4, 0}));
  EXPECT_EQ(ReasonOf(RunOp("slice_backward", {g},
                           {{"dim", int64_t{1}},
                            {"start", int64_t{2}},
                            {"step", int64_t{2}},
                            {"size", int64_t{4}}})),
            Reason::kBadAttribute);
}

}  // namespace
}  // namespace tensord
