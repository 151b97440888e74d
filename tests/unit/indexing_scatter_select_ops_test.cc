// scatter, scatter_add, index_add, masked_select and nonzero for every dtype they list and
// both index dtypes, against references computed in the test; bad indices are refused before
// anything is read or written.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/shape_test_util.h"

namespace tensord {
namespace {
using namespace testing;
using Ints = std::vector<int64_t>;

const std::vector<DType> kIndexDTypes = {DType::kI32, DType::kI64};
const std::vector<DType> kNumeric = {DType::kF32, DType::kF64, DType::kI32, DType::kI64};

// Sums in f32 round differently from the f64 reference; copies must still be exact.
::testing::AssertionResult SameSums(const Tensor& actual, const Shape& shape,
                                    const std::vector<double>& expected) {
  if (!actual.defined() || actual.shape() != shape) return SameValues(actual, shape, expected);
  return AllClose(actual, expected, 1e-6, 1e-5);
}

// out = x; then for every position p of the index, out[p with dim := index[p]] = src[p]
// (or += src[p]).
std::vector<double> ScatterReference(const Tensor& x, const Tensor& index, const Tensor& src,
                                     int64_t dim, bool add) {
  std::vector<double> out = x.ToDoubles();
  const Shape xs = x.rank() ? x.shape() : Shape{1};
  const Shape is = index.rank() ? index.shape() : Shape{1};
  const Shape ss = src.rank() ? src.shape() : Shape{1};
  ForEachIndex(is, [&](const Shape& p) {
    Shape to = p;
    to[dim] = static_cast<int64_t>(index.ElementAsDouble(FlatIndex(is, p)));
    const double v = src.ElementAsDouble(FlatIndex(ss, p));
    double& slot = out[FlatIndex(xs, to)];
    slot = add ? slot + v : v;
  });
  return out;
}

TEST(IndexingScatterSelectOps, ScatterAndScatterAddEveryDtype) {
  for (DType d : kNumeric) {
    for (DType id : kIndexDTypes) {
      SCOPED_TRACE(std::string(DTypeName(d)) + " index " + std::string(DTypeName(id)));
      Tensor x = Sample(d, {3, 5}, 1);
      // src larger than the index, index narrower than x outside dim: torch reads the block.
      Tensor src = Sample(d, {3, 4}, 2);
      // Distinct per row along dim 1, so scatter's result does not depend on write order.
      Tensor index = Values(id, {2, 3}, {4, 0, 2, 1, 3, 0});
      for (int64_t dim : {int64_t{1}, int64_t{-1}}) {
        EXPECT_TRUE(SameValues(Run1("scatter", {x, index, src}, {{"dim", dim}}), {3, 5},
                               ScatterReference(x, index, src, 1, false)));
      }
      // Repeated indices accumulate in scatter_add.
      Tensor rep = Values(id, {3, 2}, {2, 0, 2, 2, 0, 1});
      EXPECT_TRUE(SameSums(Run1("scatter_add", {x, rep, src}, {{"dim", int64_t{0}}}), {3, 5},
                           ScatterReference(x, rep, src, 0, true)));
      EXPECT_TRUE(
          SameSums(Run1("scatter", {x, Values(id, {3, 1}, {1, 2, 0}), src}, {{"dim", int64_t{0}}}),
                   {3, 5}, ScatterReference(x, Values(id, {3, 1}, {1, 2, 0}), src, 0, false)));
      Tensor x3 = Sample(d, {2, 3, 4}, 3);
      Tensor src3 = Sample(d, {2, 4, 4}, 4);
      Tensor idx3 = Random(id, {2, 4, 3}, 5, 0, 3);
      EXPECT_TRUE(SameSums(Run1("scatter_add", {x3, idx3, src3}, {{"dim", int64_t{1}}}), {2, 3, 4},
                           ScatterReference(x3, idx3, src3, 1, true)));
      // Empty index: the input comes back; 0-d tensors scatter one element.
      EXPECT_TRUE(
          SameValues(Run1("scatter", {x, Values(id, {0, 2}, {}), src}, {{"dim", int64_t{0}}}),
                     {3, 5}, x.ToDoubles()));
      Tensor s = Sample(d, {}, 6), v = Sample(d, {}, 7);
      EXPECT_TRUE(SameValues(Run1("scatter", {s, Values(id, {}, {0}), v}, {{"dim", int64_t{0}}}),
                             {}, v.ToDoubles()));
      EXPECT_TRUE(SameSums(Run1("scatter_add", {s, Values(id, {}, {0}), v}, {{"dim", int64_t{0}}}),
                           {}, {s.ToDoubles()[0] + v.ToDoubles()[0]}));
    }
  }
}

TEST(IndexingScatterSelectOps, ScatterErrors) {
  Tensor x = Sample(DType::kF32, {3, 4}, 1);
  Tensor src = Sample(DType::kF32, {3, 4}, 2);
  for (const char* op : {"scatter", "scatter_add"}) {
    SCOPED_TRACE(op);
    auto out = RunOp(op, {x, Values(DType::kI64, {1, 2}, {1, 4}), src}, {{"dim", int64_t{1}}});
    EXPECT_EQ(ReasonOf(out), Reason::kIndexOutOfRange);
    EXPECT_EQ(GetMetadata(out.status())["index"], "4");
    EXPECT_EQ(GetMetadata(out.status())["size"], "4");
    EXPECT_EQ(
        ReasonOf(RunOp(op, {x, Values(DType::kI32, {1, 1}, {-1}), src}, {{"dim", int64_t{0}}})),
        Reason::kIndexOutOfRange);
    EXPECT_EQ(
        ReasonOf(RunOp(op, {x, Values(DType::kF32, {1, 1}, {0}), src}, {{"dim", int64_t{0}}})),
        Reason::kDtypeMismatch);
    EXPECT_EQ(
        ReasonOf(RunOp(op, {x, Values(DType::kI64, {1, 1}, {0}), Sample(DType::kF64, {3, 4}, 3)},
                       {{"dim", int64_t{0}}})),
        Reason::kDtypeMismatch);
    EXPECT_EQ(
        ReasonOf(RunOp(op, {x, Values(DType::kI64, {2}, {0, 1}), src}, {{"dim", int64_t{0}}})),
        Reason::kShapeMismatch);  // ranks differ
    EXPECT_EQ(ReasonOf(RunOp(op, {x, Values(DType::kI64, {1, 5}, {0, 0, 0, 0, 0}), src},
                             {{"dim", int64_t{0}}})),
              Reason::kShapeMismatch);  // wider than x outside dim
    EXPECT_EQ(ReasonOf(RunOp(op, {x, Values(DType::kI64, {4, 1}, {0, 0, 0, 0}), src},
                             {{"dim", int64_t{1}}})),
              Reason::kShapeMismatch);  // taller than src
    EXPECT_EQ(
        ReasonOf(RunOp(op, {x, Values(DType::kI64, {1, 1}, {0}), src}, {{"dim", int64_t{2}}})),
        Reason::kBadAttribute);
    EXPECT_EQ(ReasonOf(RunOp(op,
                             {Sample(DType::kBool, {2}, 1), Values(DType::kI64, {1}, {0}),
                              Sample(DType::kBool, {2}, 1)},
                             {{"dim", int64_t{0}}})),
              Reason::kDtypeMismatch);
  }
}

// scatter(input, dim, index, value): a number operand (a wrapped scalar, as a Python float
// travels) is written at every indexed place in the input's dtype, whatever the index's shape;
// a number the dtype cannot hold is refused, as PyTorch refuses it.
TEST(IndexingScatterSelectOps, ScatterValue) {
  Tensor index = Values(DType::kI64, {2, 3}, {2, 0, 1, 0, 1, 2});
  for (DType d : kNumeric) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = Sample(d, {3, 4}, 1);
    const double v = IsInt(d) ? -2.0 : 2.5;  // -2.7 truncates toward zero into ints
    Tensor fill = Values(d, {2, 3}, std::vector<double>(6, v));
    Tensor out =
        Run1("scatter", {x, index, ScalarOperand(IsInt(d) ? -2.7 : 2.5)}, {{"dim", int64_t{0}}});
    EXPECT_EQ(out.dtype(), d);
    EXPECT_TRUE(SameValues(out, {3, 4}, ScatterReference(x, index, fill, 0, false)));
  }
  Tensor x = Sample(DType::kF32, {3, 4}, 1);
  EXPECT_EQ(ReasonOf(RunOp("scatter", {x, index, ScalarOperand(1e40)}, {{"dim", int64_t{0}}})),
            Reason::kDtypeMismatch);
  EXPECT_TRUE(std::isinf(
      Run1("scatter", {x, index, ScalarOperand(INFINITY)}, {{"dim", int64_t{0}}}).ToDoubles()[0]));
  Tensor xi = Sample(DType::kI32, {3, 4}, 1);
  for (double bad : {3e9, double(NAN), double(INFINITY)}) {
    EXPECT_EQ(ReasonOf(RunOp("scatter", {xi, index, ScalarOperand(bad)}, {{"dim", int64_t{0}}})),
              Reason::kDtypeMismatch);
  }
  // The index must still fit the input outside dim.
  EXPECT_EQ(
      ReasonOf(RunOp("scatter", {x, Values(DType::kI64, {1, 5}, {0, 0, 0, 0, 0}), ScalarOperand(1)},
                     {{"dim", int64_t{0}}})),
      Reason::kShapeMismatch);
}

TEST(IndexingScatterSelectOps, IndexAddEveryDtype) {
  for (DType d : kNumeric) {
    for (DType id : kIndexDTypes) {
      SCOPED_TRACE(std::string(DTypeName(d)) + " index " + std::string(DTypeName(id)));
      Tensor x = Sample(d, {3, 4, 2}, 8);
      Tensor index = Values(id, {5}, {3, 0, 3, 1, 3});
      Tensor source = Sample(d, {3, 5, 2}, 9);
      for (double alpha : {1.0, -2.0}) {
        for (int64_t dim : {int64_t{1}, int64_t{-2}}) {
          std::vector<double> want = x.ToDoubles();
          ForEachIndex({3, 5, 2}, [&](const Shape& p) {
            const int64_t j = static_cast<int64_t>(index.ElementAsDouble(p[1]));
            want[FlatIndex({3, 4, 2}, {p[0], j, p[2]})] += alpha * At(source, p);
          });
          EXPECT_TRUE(
              SameSums(Run1("index_add", {x, index, source}, {{"dim", dim}, {"alpha", alpha}}),
                       {3, 4, 2}, want));
        }
      }
      Tensor s = Sample(d, {}, 10), v = Sample(d, {}, 11);
      EXPECT_TRUE(SameSums(Run1("index_add", {s, Values(id, {1}, {0}), v}, {{"dim", int64_t{0}}}),
                           {}, {s.ToDoubles()[0] + v.ToDoubles()[0]}));
      EXPECT_TRUE(SameValues(Run1("index_add", {x, Values(id, {0}, {}), Sample(d, {3, 0, 2}, 1)},
                                  {{"dim", int64_t{1}}}),
                             {3, 4, 2}, x.ToDoubles()));
    }
  }
  Tensor x = Sample(DType::kF32, {3, 4}, 1);
  auto reason = [](const std::vector<Tensor>& in, const AttrMap& attrs) {
    return ReasonOf(RunOp("index_add", in, attrs));
  };
  const AttrMap dim0 = {{"dim", int64_t{0}}};
  EXPECT_EQ(reason({x, Values(DType::kI64, {1}, {3}), Sample(DType::kF32, {1, 4}, 1)}, dim0),
            Reason::kIndexOutOfRange);
  EXPECT_EQ(reason({x, Values(DType::kI64, {2}, {0, 1}), Sample(DType::kF32, {1, 4}, 1)}, dim0),
            Reason::kShapeMismatch);
  EXPECT_EQ(reason({x, Values(DType::kI64, {1, 1}, {0}), Sample(DType::kF32, {1, 4}, 1)}, dim0),
            Reason::kShapeMismatch);
  EXPECT_EQ(reason({x, Values(DType::kI64, {1}, {0}), Sample(DType::kF64, {1, 4}, 1)}, dim0),
            Reason::kDtypeMismatch);
  EXPECT_EQ(reason({Sample(DType::kF32, {}, 1), Values(DType::kI64, {2}, {0, 0}),
                    Sample(DType::kF32, {}, 1)},
                   dim0),
            Reason::kShapeMismatch);  // a 0-d input takes exactly one index
  Tensor xi = Sample(DType::kI64, {3}, 1);
  EXPECT_EQ(reason({xi, Values(DType::kI64, {1}, {0}), Sample(DType::kI64, {1}, 1)},
                   {{"dim", int64_t{0}}, {"alpha", 0.5}}),
            Reason::kBadAttribute);  // integer tensors take an integer alpha
}

TEST(IndexingScatterSelectOps, MaskedSelectEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = Sample(d, {2, 3}, 12);
    Tensor mask = Values(DType::kBool, {2, 3}, {1, 0, 1, 0, 0, 1});
    std::vector<double> want;
    ForEachIndex({2, 3}, [&](const Shape& i) {
      if (At(mask, i)) want.push_back(At(x, i));
    });
    Tensor out = Run1("masked_select", {x, mask});
    EXPECT_EQ(out.dtype(), d);
    EXPECT_TRUE(SameValues(out, {3}, want));
    // Input and mask broadcast against each other first.
    Tensor col = Values(DType::kBool, {2, 1, 1}, {0, 1});
    want.clear();
    ForEachIndex({2, 2, 3}, [&](const Shape& i) {
      if (i[0] == 1) want.push_back(At(x, {i[1], i[2]}));
    });
    EXPECT_TRUE(SameValues(Run1("masked_select", {x, col}), {6}, want));
    Tensor s = Sample(d, {}, 13);
    EXPECT_TRUE(
        SameValues(Run1("masked_select", {s, Values(DType::kBool, {}, {1})}), {1}, s.ToDoubles()));
    EXPECT_TRUE(SameValues(Run1("masked_select", {x, Values(DType::kBool, {}, {0})}), {0}, {}));
    EXPECT_TRUE(SameValues(
        Run1("masked_select", {Sample(d, {0, 3}, 1), Values(DType::kBool, {3}, {1, 1, 1})}), {0},
        {}));
  }
  Tensor x = Sample(DType::kF32, {2, 3}, 1);
  EXPECT_EQ(ReasonOf(RunOp("masked_select", {x, Values(DType::kI64, {3}, {1, 0, 1})})),
            Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("masked_select", {x, Values(DType::kBool, {2}, {1, 0})})),
            Reason::kShapeMismatch);
}

// The output is charged to the caller's memory account like every other tensor.
TEST(IndexingScatterSelectOps, DataDependentOutputsAreCharged) {
  auto account = std::make_shared<MemoryAccount>(int64_t{1} << 20);
  CallEnv env;
  env.account = account;
  Tensor x = Sample(DType::kF64, {4, 4}, 1);
  auto out =
      TestDispatcher().Call("masked_select", {x, Values(DType::kBool, {4}, {1, 0, 1, 1})}, {}, env);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), Shape{12});
  EXPECT_EQ(account->used(), 12 * 8);
  out = TestDispatcher().Call("nonzero", {x}, {}, env);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(account->used(), 16 * 2 * 8);  // every sample is nonzero: [16, 2] of i64
  auto tiny = std::make_shared<MemoryAccount>(8);
  env.account = tiny;
  EXPECT_EQ(ReasonOf(TestDispatcher().Call("nonzero", {x}, {}, env)), Reason::kQuotaExceeded);
}

TEST(IndexingScatterSelectOps, NonzeroEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    for (const Shape& shape : {Shape{3, 4}, Shape{2, 3, 2}, Shape{5}, Shape{0, 2}}) {
      Tensor x = Random(d, shape, 14, -1.5, 1.5);  // ints: -2..1, plenty of zeros
      std::vector<double> want;
      int64_t n = 0;
      ForEachIndex(shape, [&](const Shape& i) {
        if (At(x, i) == 0) return;
        want.insert(want.end(), i.begin(), i.end());
        ++n;
      });
      Tensor out = Run1("nonzero", {x});
      EXPECT_EQ(out.dtype(), DType::kI64);
      EXPECT_TRUE(SameValues(out, {n, static_cast<int64_t>(shape.size())}, want));
    }
    EXPECT_TRUE(SameValues(Run1("nonzero", {Values(d, {}, {1})}), {1, 0}, {}));
    EXPECT_TRUE(SameValues(Run1("nonzero", {Values(d, {}, {0})}), {0, 0}, {}));
  }
  // NaN is nonzero; -0.0 is zero.
  Tensor f = Values(DType::kF32, {3}, {NAN, -0.0, 2});
  EXPECT_TRUE(SameValues(Run1("nonzero", {f}), {2, 1}, {0, 2}));
}

// as_tuple: the columns of nonzero's [n, rank] result, one 1-d tensor per dim; a 0-d input
// counts as 1-d (one tensor), as in torch.
TEST(IndexingScatterSelectOps, NonzeroAsTuple) {
  auto cols =
      RunOp("nonzero", {Values(DType::kF32, {2, 3}, {0, 1, 0, 2, 0, 3})}, {{"as_tuple", true}});
  ASSERT_TRUE(cols.ok()) << cols.status();
  ASSERT_EQ(cols->size(), 2u);
  EXPECT_TRUE(SameValues((*cols)[0], {3}, {0, 1, 1}));
  EXPECT_TRUE(SameValues((*cols)[1], {3}, {1, 0, 2}));
  cols = RunOp("nonzero", {Values(DType::kI64, {}, {5})}, {{"as_tuple", true}});
  ASSERT_TRUE(cols.ok()) << cols.status();
  ASSERT_EQ(cols->size(), 1u);
  EXPECT_TRUE(SameValues((*cols)[0], {1}, {0}));
  cols = RunOp("nonzero", {Values(DType::kBool, {0, 2}, {})}, {{"as_tuple", true}});
  ASSERT_TRUE(cols.ok()) << cols.status();
  ASSERT_EQ(cols->size(), 2u);
  EXPECT_TRUE(SameValues((*cols)[1], {0}, {}));
}

}  // namespace
}  // namespace tensord
