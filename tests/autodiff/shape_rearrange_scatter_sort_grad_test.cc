// Finite-difference gradient checks (f64) for flip, roll, repeat, tile, tril, triu, pad,
// scatter, scatter_add, index_add, masked_select, sort and topk, and the internal ops their
// gradients are written with.
#include <gtest/gtest.h>

#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;
using Ints = std::vector<int64_t>;

Tensor X(Shape shape, uint32_t seed) { return Random(DType::kF64, std::move(shape), seed); }

TEST(RearrangeScatterSortGrad, FlipAndRoll) {
  Tensor x = X({2, 3, 4}, 1);
  EXPECT_TRUE(GradCheck("flip", {x}, {{"dims", Ints{0, -1}}}));
  EXPECT_TRUE(GradCheck("flip", {x}, {{"dims", Ints{1}}}));
  EXPECT_TRUE(GradCheck("roll", {x}, {{"shifts", Ints{1, -5}}, {"dims", Ints{2, 1}}}));
  EXPECT_TRUE(GradCheck("roll", {x}, {{"shifts", Ints{7}}}));  // flattened
  EXPECT_TRUE(GradCheck("roll", {x}, {{"shifts", Ints{2, 3}}, {"dims", Ints{-1, -1}}}));
}

TEST(RearrangeScatterSortGrad, RepeatAndTile) {
  Tensor x = X({2, 3}, 2);
  EXPECT_TRUE(GradCheck("repeat", {x}, {{"repeats", Ints{2, 1}}}));
  EXPECT_TRUE(GradCheck("repeat", {x}, {{"repeats", Ints{3, 2, 2}}}));
  EXPECT_TRUE(GradCheck("repeat", {x}, {{"repeats", Ints{1, 0}}}));
  EXPECT_TRUE(GradCheck("repeat", {X({}, 3)}, {{"repeats", Ints{4}}}));
  EXPECT_TRUE(GradCheck("tile", {x}, {{"dims", Ints{2}}}));
  EXPECT_TRUE(GradCheck("tile", {X({}, 27)}, {{"dims", Ints{}}}));
  EXPECT_TRUE(GradCheck("tile", {x}, {{"dims", Ints{2, 1, 3}}}));
}

TEST(RearrangeScatterSortGrad, TrilTriu) {
  for (const char* op : {"tril", "triu"}) {
    EXPECT_TRUE(GradCheck(op, {X({4, 5}, 4)})) << op;
    EXPECT_TRUE(GradCheck(op, {X({2, 3, 3}, 5)}, {{"diagonal", int64_t{-1}}})) << op;
    EXPECT_TRUE(GradCheck(op, {X({3, 4}, 6)}, {{"diagonal", int64_t{2}}})) << op;
  }
}

TEST(RearrangeScatterSortGrad, PadEveryMode) {
  Tensor x = X({2, 3, 4}, 7);
  EXPECT_TRUE(GradCheck("pad", {x}, {{"pad", Ints{1, 2}}, {"value", 3.0}}));
  EXPECT_TRUE(GradCheck("pad", {x}, {{"pad", Ints{-1, 2, 0, 1, 1, -1}}}));
  // Reflected, replicated and wrapped elements are read more than once: their gradients add.
  for (const char* mode : {"reflect", "replicate", "circular"}) {
    const std::string m = mode;
    EXPECT_TRUE(GradCheck("pad", {x}, {{"pad", Ints{3, 2}}, {"mode", m}})) << m;
    EXPECT_TRUE(GradCheck("pad", {x}, {{"pad", Ints{1, 2, 2, 1}}, {"mode", m}})) << m;
    EXPECT_TRUE(GradCheck("pad", {x}, {{"pad", Ints{-1, 2}}, {"mode", m}})) << m;
  }
  EXPECT_TRUE(GradCheck("pad", {X({1, 2, 3, 3}, 8)},
                        {{"pad", Ints{1, 1, 2, 0, 1, 1}}, {"mode", std::string("replicate")}}));
  EXPECT_TRUE(
      GradCheck("pad_backward", {X({2, 3, 9}, 9)},
                {{"pad", Ints{3, 2}}, {"mode", std::string("reflect")}, {"size", Ints{2, 3, 4}}}));
  // BALANCED recomputes pad in backward.
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  EXPECT_TRUE(
      GradCheck("pad", {x}, {{"pad", Ints{2, 2}}, {"mode", std::string("circular")}}, balanced));
}

TEST(RearrangeScatterSortGrad, ScatterFamily) {
  Tensor x = X({3, 5}, 10);
  Tensor src = X({3, 4}, 11);  // larger than the index: its unread elements get zero gradient
  // Distinct indices along dim: with repeats scatter keeps one write, so only that one element
  // of src would reach the output.
  Tensor index = Values(DType::kI64, {2, 3}, {4, 0, 2, 1, 3, 0});
  EXPECT_TRUE(GradCheck("scatter", {x, index, src}, {{"dim", int64_t{1}}}));
  Tensor rows = Values(DType::kI32, {2, 2}, {2, 0, 1, 2});
  EXPECT_TRUE(GradCheck("scatter", {x, rows, src}, {{"dim", int64_t{-2}}}));
  Tensor repeated = Values(DType::kI64, {3, 2}, {2, 0, 2, 2, 0, 1});
  EXPECT_TRUE(GradCheck("scatter_add", {x, repeated, src}, {{"dim", int64_t{0}}}));
  EXPECT_TRUE(GradCheck("scatter_add", {X({}, 12), Values(DType::kI64, {}, {0}), X({}, 13)},
                        {{"dim", int64_t{0}}}));
  Tensor y = X({3, 4, 2}, 14);
  Tensor idx = Values(DType::kI64, {5}, {3, 0, 3, 1, 3});
  EXPECT_TRUE(GradCheck("index_add", {y, idx, X({3, 5, 2}, 15)}, {{"dim", int64_t{1}}}));
  EXPECT_TRUE(
      GradCheck("index_add", {y, idx, X({3, 5, 2}, 16)}, {{"dim", int64_t{-2}}, {"alpha", -1.5}}));
  EXPECT_TRUE(GradCheck("index_add", {X({}, 17), Values(DType::kI32, {1}, {0}), X({}, 18)},
                        {{"dim", int64_t{0}}, {"alpha", 2.0}}));
  EXPECT_TRUE(GradCheck("index_add", {X({5}, 25), Values(DType::kI64, {}, {3}), X({}, 26)},
                        {{"dim", int64_t{0}}}));
}

TEST(RearrangeScatterSortGrad, MaskedSelect) {
  Tensor x = X({2, 3}, 19);
  Tensor mask = Values(DType::kBool, {2, 3}, {1, 0, 1, 0, 1, 1});
  EXPECT_TRUE(GradCheck("masked_select", {x, mask}));
  // The input broadcasts up to the mask: each of its elements may be selected several times.
  Tensor wide = Values(DType::kBool, {2, 2, 3}, {1, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1});
  EXPECT_TRUE(GradCheck("masked_select", {x, wide}));
  EXPECT_TRUE(GradCheck("masked_select", {X({3}, 20), Values(DType::kBool, {2, 1}, {1, 0})}));
  EXPECT_TRUE(GradCheck("masked_select_backward", {X({4}, 21), mask}, {{"size", Ints{2, 3}}}));
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  EXPECT_TRUE(GradCheck("masked_select", {x, mask}, {}, balanced));
}

TEST(RearrangeScatterSortGrad, SortAndTopk) {
  // Random f64 values are distinct, so a small perturbation never reorders them.
  Tensor x = X({3, 5}, 22);
  EXPECT_TRUE(GradCheck("sort", {x}));
  EXPECT_TRUE(GradCheck("sort", {x}, {{"dim", int64_t{0}}, {"descending", true}}));
  EXPECT_TRUE(GradCheck("sort", {X({}, 23)}));
  EXPECT_TRUE(GradCheck("topk", {x}, {{"k", int64_t{2}}}));
  EXPECT_TRUE(GradCheck("topk", {x}, {{"k", int64_t{3}}, {"dim", int64_t{0}}, {"largest", false}}));
  EXPECT_TRUE(GradCheck("topk", {X({2, 3, 4}, 24)}, {{"k", int64_t{1}}, {"dim", int64_t{1}}}));
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  EXPECT_TRUE(GradCheck("topk", {x}, {{"k", int64_t{2}}}, balanced));
  EXPECT_TRUE(GradCheck("sort", {x}, {{"descending", true}}, balanced));
}

}  // namespace
}  // namespace tensord
