// index_select, gather, masked_fill, one_hot and the scatter-add internals, for every dtype
// and both index dtypes, against index-walk references; bad indices never read out of bounds.
#include <gtest/gtest.h>

#include "tests/unit/shape_test_util.h"

namespace tensord {
namespace {
using namespace testing;
using Ints = std::vector<int64_t>;

const std::vector<DType> kIndexDTypes = {DType::kI32, DType::kI64};

TEST(IndexingOps, IndexSelectEveryDtype) {
  for (DType d : kEveryDType) {
    for (DType id : kIndexDTypes) {
      SCOPED_TRACE(std::string(DTypeName(d)) + " index " + std::string(DTypeName(id)));
      Tensor x = Sample(d, {3, 4, 2}, 1);
      Tensor index = Values(id, {5}, {3, 0, 3, 1, 2});
      for (int64_t dim : {int64_t{1}, int64_t{-2}}) {
        auto want = Expected({3, 5, 2}, [&](const Shape& i) {
          return At(x, {i[0], static_cast<int64_t>(index.ElementAsDouble(i[1])), i[2]});
        });
        EXPECT_TRUE(SameValues(Run1("index_select", {x, index}, {{"dim", dim}}), {3, 5, 2}, want));
      }
      Tensor rows = Values(id, {2}, {2, 0});
      auto want = Expected({2, 4, 2}, [&](const Shape& i) {
        return At(x, {i[0] == 0 ? 2 : 0, i[1], i[2]});
      });
      EXPECT_TRUE(
          SameValues(Run1("index_select", {x, rows}, {{"dim", int64_t{0}}}), {2, 4, 2}, want));
      // Empty index, 0-d index, 0-d input.
      EXPECT_TRUE(SameValues(Run1("index_select", {x, Values(id, {0}, {})}, {{"dim", int64_t{2}}}),
                             {3, 4, 0}, {}));
      EXPECT_TRUE(SameValues(Run1("index_select", {x, Values(id, {}, {1})}, {{"dim", int64_t{2}}}),
                             {3, 4, 1}, Expected({3, 4, 1}, [&](const Shape& i) {
                               return At(x, {i[0], i[1], 1});
                             })));
      Tensor s = Sample(d, {}, 2);
      EXPECT_TRUE(SameValues(Run1("index_select", {s, Values(id, {1}, {0})}, {{"dim", int64_t{0}}}),
                             {}, s.ToDoubles()));
    }
  }
}

TEST(IndexingOps, IndexSelectErrors) {
  Tensor x = Sample(DType::kF32, {3, 4}, 1);
  for (double bad : {4.0, -1.0, 100.0}) {
    auto out =
        RunOp("index_select", {x, Values(DType::kI64, {3}, {0, bad, 1})}, {{"dim", int64_t{1}}});
    EXPECT_EQ(ReasonOf(out), Reason::kIndexOutOfRange) << bad;
    Metadata md = GetMetadata(out.status());
    EXPECT_EQ(md["index"], absl::StrCat(static_cast<int64_t>(bad)));
    EXPECT_EQ(md["size"], "4");
  }
  EXPECT_EQ(
      ReasonOf(RunOp("index_select", {x, Values(DType::kF32, {1}, {0})}, {{"dim", int64_t{0}}})),
      Reason::kDtypeMismatch);
  EXPECT_EQ(
      ReasonOf(RunOp("index_select", {x, Values(DType::kI64, {1, 1}, {0})}, {{"dim", int64_t{0}}})),
      Reason::kShapeMismatch);
  EXPECT_EQ(
      ReasonOf(RunOp("index_select", {x, Values(DType::kI64, {1}, {0})}, {{"dim", int64_t{2}}})),
      Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("index_select", {x, Values(DType::kI64, {1}, {0})})),
            Reason::kBadAttribute);  // dim is required
}

TEST(IndexingOps, GatherEveryDtype) {
  for (DType d : kEveryDType) {
    for (DType id : kIndexDTypes) {
      SCOPED_TRACE(std::string(DTypeName(d)) + " index " + std::string(DTypeName(id)));
      Tensor x = Sample(d, {3, 4}, 3);
      // Along dim 1 the index may be smaller than the input in dim 0 and wider in dim 1.
      Tensor index = Values(id, {2, 5}, {0, 3, 3, 1, 2, 1, 1, 0, 2, 3});
      for (int64_t dim : {int64_t{1}, int64_t{-1}}) {
        auto want = Expected({2, 5}, [&](const Shape& i) {
          return At(x, {i[0], static_cast<int64_t>(At(index, i))});
        });
        EXPECT_TRUE(SameValues(Run1("gather", {x, index}, {{"dim", dim}}), {2, 5}, want));
      }
      Tensor index0 = Values(id, {4, 2}, {2, 0, 1, 1, 0, 2, 2, 2});
      auto want = Expected({4, 2}, [&](const Shape& i) {
        return At(x, {static_cast<int64_t>(At(index0, i)), i[1]});
      });
      EXPECT_TRUE(SameValues(Run1("gather", {x, index0}, {{"dim", int64_t{0}}}), {4, 2}, want));
      Tensor x3 = Sample(d, {2, 3, 4}, 4);
      Tensor index3 = Random(id, {2, 2, 3}, 5, 0, 3);
      auto want3 = Expected({2, 2, 3}, [&](const Shape& i) {
        return At(x3, {i[0], static_cast<int64_t>(At(index3, i)), i[2]});
      });
      EXPECT_TRUE(
          SameValues(Run1("gather", {x3, index3}, {{"dim", int64_t{1}}}), {2, 2, 3}, want3));
      EXPECT_TRUE(SameValues(Run1("gather", {x, Values(id, {0, 4}, {})}, {{"dim", int64_t{0}}}),
                             {0, 4}, {}));
      Tensor s = Sample(d, {}, 6);
      EXPECT_TRUE(SameValues(Run1("gather", {s, Values(id, {}, {0})}, {{"dim", int64_t{0}}}), {},
                             s.ToDoubles()));
    }
  }
}

TEST(IndexingOps, GatherErrors) {
  Tensor x = Sample(DType::kF32, {3, 4}, 1);
  auto out = RunOp("gather", {x, Values(DType::kI64, {1, 2}, {1, 3})}, {{"dim", int64_t{0}}});
  EXPECT_EQ(ReasonOf(out), Reason::kIndexOutOfRange);
  EXPECT_EQ(GetMetadata(out.status())["index"], "3");
  EXPECT_EQ(GetMetadata(out.status())["size"], "3");
  EXPECT_EQ(
      ReasonOf(RunOp("gather", {x, Values(DType::kI32, {1, 1}, {-1})}, {{"dim", int64_t{1}}})),
      Reason::kIndexOutOfRange);
  EXPECT_EQ(ReasonOf(RunOp("gather", {x, Values(DType::kI64, {2}, {0, 1})}, {{"dim", int64_t{0}}})),
            Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("gather", {x, Values(DType::kI64, {4, 1}, {0, 1, 2, 0})},
                           {{"dim", int64_t{1}}})),
            Reason::kShapeMismatch);
  EXPECT_EQ(
      ReasonOf(RunOp("gather", {x, Values(DType::kBool, {1, 1}, {0})}, {{"dim", int64_t{1}}})),
      Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("gather", {x, Values(DType::kI64, {1, 1}, {0})}, {{"dim", int64_t{2}}})),
            Reason::kBadAttribute);
}

TEST(IndexingOps, ScatterAddInternals) {
  // index_add_internal: rows of source added at the indexed rows (repeats accumulate).
  Tensor self = Values(DType::kF64, {3, 2}, {1, 1, 1, 1, 1, 1});
  Tensor src = Values(DType::kF64, {3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor out = Run1("index_add_internal", {self, Values(DType::kI64, {3}, {2, 0, 2}), src},
                    {{"dim", int64_t{0}}});
  EXPECT_TRUE(SameValues(out, {3, 2}, {4, 5, 1, 1, 7, 9}));
  // scatter_add_internal: each src element added at its index along dim.
  Tensor idx = Values(DType::kI32, {2, 2}, {1, 1, 0, 1});
  Tensor src2 = Values(DType::kF64, {2, 2}, {1, 2, 3, 4});
  out = Run1("scatter_add_internal", {Values(DType::kF64, {2, 3}, {0, 0, 0, 0, 0, 0}), idx, src2},
             {{"dim", int64_t{1}}});
  EXPECT_TRUE(SameValues(out, {2, 3}, {0, 3, 0, 3, 4, 0}));
  EXPECT_EQ(ReasonOf(RunOp("scatter_add_internal",
                           {Values(DType::kF64, {2, 3}, {0, 0, 0, 0, 0, 0}),
                            Values(DType::kI32, {2, 2}, {1, 3, 0, 1}), src2},
                           {{"dim", int64_t{1}}})),
            Reason::kIndexOutOfRange);
  for (const char* op : {"index_add_internal", "scatter_add_internal"}) {
    auto def = OpRegistry::Builtin().Find(op);
    ASSERT_TRUE(def.ok());
    EXPECT_TRUE((*def)->internal) << op;
  }
}

TEST(IndexingOps, MaskedFillEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = Sample(d, {2, 3}, 7);
    const double value = IsBool(d) ? 1 : -7;
    Tensor mask = Values(DType::kBool, {2, 3}, {1, 0, 0, 1, 1, 0});
    auto want = Expected({2, 3}, [&](const Shape& i) { return At(mask, i) ? value : At(x, i); });
    EXPECT_TRUE(SameValues(Run1("masked_fill", {x, mask}, {{"value", value}}), {2, 3}, want));
    // The mask broadcasts over rows; a column mask broadcasts the input up.
    Tensor row = Values(DType::kBool, {3}, {0, 1, 0});
    want = Expected({2, 3}, [&](const Shape& i) { return i[1] == 1 ? value : At(x, i); });
    EXPECT_TRUE(SameValues(Run1("masked_fill", {x, row}, {{"value", value}}), {2, 3}, want));
    Tensor v = Sample(d, {3}, 8);
    Tensor col = Values(DType::kBool, {2, 1}, {1, 0});
    want = Expected({2, 3}, [&](const Shape& i) { return i[0] == 0 ? value : At(v, {i[1]}); });
    EXPECT_TRUE(SameValues(Run1("masked_fill", {v, col}, {{"value", value}}), {2, 3}, want));
    Tensor s = Sample(d, {}, 9);
    EXPECT_TRUE(SameValues(
        Run1("masked_fill", {s, Values(DType::kBool, {}, {1})}, {{"value", value}}), {}, {value}));
    EXPECT_TRUE(SameValues(Run1("masked_fill", {Sample(d, {0, 3}, 1), row}, {{"value", value}}),
                           {0, 3}, {}));
  }
  // Integer tensors truncate the value like torch; they cannot hold inf.
  Tensor i = Values(DType::kI32, {2}, {1, 2});
  Tensor m = Values(DType::kBool, {2}, {1, 0});
  EXPECT_TRUE(SameValues(Run1("masked_fill", {i, m}, {{"value", 2.9}}), {2}, {2, 2}));
  EXPECT_EQ(ReasonOf(RunOp("masked_fill", {i, m}, {{"value", 1e300}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("masked_fill", {i, Values(DType::kI32, {2}, {1, 0})}, {{"value", 0.0}})),
            Reason::kDtypeMismatch);
  EXPECT_EQ(
      ReasonOf(RunOp("masked_fill", {i, Values(DType::kBool, {3}, {1, 0, 1})}, {{"value", 0.0}})),
      Reason::kShapeMismatch);
}

TEST(IndexingOps, OneHot) {
  for (DType id : kIndexDTypes) {
    Tensor x = Values(id, {2, 2}, {0, 3, 1, 3});
    Tensor out = Run1("one_hot", {x});
    EXPECT_EQ(out.dtype(), DType::kI64);
    auto want = Expected({2, 2, 4}, [&](const Shape& i) { return At(x, {i[0], i[1]}) == i[2]; });
    EXPECT_TRUE(SameValues(out, {2, 2, 4}, want));
    out = Run1("one_hot", {x}, {{"num_classes", int64_t{6}}});
    want = Expected({2, 2, 6}, [&](const Shape& i) { return At(x, {i[0], i[1]}) == i[2]; });
    EXPECT_TRUE(SameValues(out, {2, 2, 6}, want));
    EXPECT_TRUE(SameValues(Run1("one_hot", {Values(id, {}, {2})}), {3}, {0, 0, 1}));
    EXPECT_TRUE(SameValues(Run1("one_hot", {Values(id, {0}, {})}, {{"num_classes", int64_t{3}}}),
                           {0, 3}, {}));
    EXPECT_EQ(ReasonOf(RunOp("one_hot", {x}, {{"num_classes", int64_t{3}}})),
              Reason::kIndexOutOfRange);
    EXPECT_EQ(ReasonOf(RunOp("one_hot", {Values(id, {2}, {1, -1})})), Reason::kIndexOutOfRange);
    EXPECT_EQ(ReasonOf(RunOp("one_hot", {Values(id, {0}, {})})), Reason::kBadAttribute);
    EXPECT_EQ(ReasonOf(RunOp("one_hot", {x}, {{"num_classes", int64_t{-2}}})),
              Reason::kBadAttribute);
  }
  EXPECT_EQ(ReasonOf(RunOp("one_hot", {Values(DType::kF32, {1}, {0})})), Reason::kDtypeMismatch);
}

}  // namespace
}  // namespace tensord
