// sort, argsort and topk for every dtype they list, against std::stable_sort of each line:
// the order of torch's stable sort (NaN above every number, ties in index order also when
// descending), including ties, NaN, empty and 0-d inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tests/unit/shape_test_util.h"

namespace tensord {
namespace {
using namespace testing;

const std::vector<DType> kSortable = {DType::kF32, DType::kF64, DType::kI32, DType::kI64};

// Stable order of one line; NaN compares above every number and equal to NaN.
std::vector<int64_t> StableOrder(const std::vector<double>& line, bool descending) {
  auto less = [](double a, double b) { return !std::isnan(a) && (std::isnan(b) || a < b); };
  std::vector<int64_t> order(line.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return descending ? less(line[b], line[a]) : less(line[a], line[b]);
  });
  return order;
}

struct Sorted {
  Shape shape;
  std::vector<double> values, indices;
};

// The first k of every line along dim, sorted.
Sorted Reference(const Tensor& x, int64_t dim, bool descending, int64_t k) {
  Sorted r;
  r.shape = x.shape();
  r.shape[dim] = k;
  r.values.resize(NumElements(r.shape));
  r.indices.resize(NumElements(r.shape));
  Shape lines = x.shape();
  lines[dim] = 1;
  ForEachIndex(lines, [&](const Shape& base) {
    std::vector<double> line;
    Shape i = base;
    for (i[dim] = 0; i[dim] < x.dim(dim); ++i[dim]) line.push_back(At(x, i));
    std::vector<int64_t> order = StableOrder(line, descending);
    for (i[dim] = 0; i[dim] < k; ++i[dim]) {
      r.values[FlatIndex(r.shape, i)] = line[order[i[dim]]];
      r.indices[FlatIndex(r.shape, i)] = static_cast<double>(order[i[dim]]);
    }
  });
  return r;
}

// Few distinct values, so every line has ties; floats get a NaN and a -0.0 / 0.0 pair too.
Tensor WithTies(DType d, Shape shape, uint32_t seed) {
  Tensor t = Random(d, shape, seed, -3, 3);
  std::vector<double> v = t.ToDoubles();
  for (double& e : v) e = std::round(e);
  if (IsFloat(d) && v.size() >= 4) {
    v[1] = NAN;
    v[2] = -0.0;
    v[v.size() - 1] = NAN;
  }
  return Values(d, std::move(shape), v);
}

TEST(SortingOps, SortAndArgsortEveryDtype) {
  for (DType d : kSortable) {
    SCOPED_TRACE(DTypeName(d));
    for (const Shape& shape : {Shape{3, 7}, Shape{4, 2, 5}, Shape{9}}) {
      Tensor x = WithTies(d, shape, 1);
      const int64_t rank = static_cast<int64_t>(shape.size());
      for (int64_t dim = -rank; dim < rank; ++dim) {
        for (bool desc : {false, true}) {
          SCOPED_TRACE(ShapeToString(shape) + " dim " + std::to_string(dim) +
                       (desc ? " desc" : " asc"));
          const int64_t nd = dim < 0 ? dim + rank : dim;
          Sorted want = Reference(x, nd, desc, shape[nd]);
          const AttrMap attrs = {{"dim", dim}, {"descending", desc}};
          auto out = RunOp("sort", {x}, attrs);
          ASSERT_TRUE(out.ok()) << out.status();
          ASSERT_EQ(out->size(), 2u);
          EXPECT_EQ((*out)[0].dtype(), d);
          EXPECT_EQ((*out)[1].dtype(), DType::kI64);
          EXPECT_TRUE(SameValues((*out)[0], shape, want.values));
          EXPECT_TRUE(SameValues((*out)[1], shape, want.indices));
          EXPECT_TRUE(SameValues(Run1("argsort", {x}, attrs), shape, want.indices));
        }
      }
    }
    // Defaults: the last dim, ascending.
    Tensor x = WithTies(d, {2, 6}, 2);
    EXPECT_TRUE(SameValues(Run1("argsort", {x}), {2, 6}, Reference(x, 1, false, 6).indices));
    Tensor s = Values(d, {}, {4});
    auto out = RunOp("sort", {s});
    ASSERT_TRUE(out.ok());
    EXPECT_TRUE(SameValues((*out)[0], {}, {4}));
    EXPECT_TRUE(SameValues((*out)[1], {}, {0}));
    EXPECT_TRUE(
        SameValues(Run1("argsort", {Values(d, {0, 3}, {})}, {{"dim", int64_t{0}}}), {0, 3}, {}));
  }
  Tensor x = Values(DType::kF32, {2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(ReasonOf(RunOp("sort", {x}, {{"dim", int64_t{2}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("argsort", {Values(DType::kBool, {2}, {1, 0})})),
            Reason::kDtypeMismatch);
}

TEST(SortingOps, TopkEveryDtype) {
  for (DType d : kSortable) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = WithTies(d, {3, 8}, 3);
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{8}}) {
      for (bool largest : {true, false}) {
        SCOPED_TRACE("k " + std::to_string(k) + (largest ? " largest" : " smallest"));
        Sorted want = Reference(x, 1, largest, k);
        auto out = RunOp("topk", {x}, {{"k", k}, {"largest", largest}});
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_TRUE(SameValues((*out)[0], want.shape, want.values));
        EXPECT_TRUE(SameValues((*out)[1], want.shape, want.indices));
        EXPECT_EQ((*out)[1].dtype(), DType::kI64);
      }
    }
    Sorted want = Reference(x, 0, true, 2);
    auto out = RunOp("topk", {x}, {{"k", int64_t{2}}, {"dim", int64_t{0}}, {"sorted", false}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(SameValues((*out)[0], {2, 8}, want.values));
    EXPECT_TRUE(SameValues((*out)[1], {2, 8}, want.indices));
    // torch.topk of a 0-d tensor returns it (k may be 0 or 1).
    for (int64_t k : {int64_t{0}, int64_t{1}}) {
      out = RunOp("topk", {Values(d, {}, {5})}, {{"k", k}});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_TRUE(SameValues((*out)[0], {}, {5}));
      EXPECT_TRUE(SameValues((*out)[1], {}, {0}));
    }
    out = RunOp("topk", {Values(d, {0, 4}, {})}, {{"k", int64_t{2}}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{0, 2}));
  }
  Tensor x = Values(DType::kF64, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = RunOp("topk", {x}, {{"k", int64_t{4}}});
  EXPECT_EQ(ReasonOf(out), Reason::kBadAttribute);
  EXPECT_EQ(GetMetadata(out.status())["attribute"], "k");
  EXPECT_EQ(ReasonOf(RunOp("topk", {x}, {{"k", int64_t{-1}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("topk", {Values(DType::kF64, {}, {1})}, {{"k", int64_t{2}}})),
            Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("topk", {x})), Reason::kBadAttribute);  // k is required
  EXPECT_EQ(ReasonOf(RunOp("topk", {x}, {{"k", int64_t{1}}, {"dim", int64_t{-3}}})),
            Reason::kBadAttribute);
}

// Sort indices and argsort are plain tensors: no autodiff identity even from an autodiff input.
TEST(SortingOps, IndicesArePlain) {
  AutodiffContext ctx(1, Checkpointing::kNone);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  Tensor x = Random(DType::kF64, {5}, 4);
  x.set_autograd(MakeLeafMeta(1, 100));
  auto out = TestDispatcher().Call("sort", {x}, {}, env);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE((*out)[0].autograd(), nullptr);
  EXPECT_EQ((*out)[1].autograd(), nullptr);
  out = TestDispatcher().Call("argsort", {x}, {}, env);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].autograd(), nullptr);
}

}  // namespace
}  // namespace tensord
