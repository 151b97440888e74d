// Finite-difference gradient checks (f64) for every differentiable shape and indexing op and
// for the internal ops their gradients are written with.
#include <gtest/gtest.h>

#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;
using Ints = std::vector<int64_t>;

Tensor X(Shape shape, uint32_t seed) { return Random(DType::kF64, std::move(shape), seed); }

TEST(ShapeGrad, Views) {
  Tensor x = X({2, 1, 3, 2}, 1);
  EXPECT_TRUE(GradCheck("flatten", {x}));
  EXPECT_TRUE(GradCheck("flatten", {x}, {{"start_dim", int64_t{1}}, {"end_dim", int64_t{-2}}}));
  EXPECT_TRUE(GradCheck("squeeze", {x}));
  EXPECT_TRUE(GradCheck("squeeze", {x}, {{"dim", int64_t{-3}}}));
  EXPECT_TRUE(GradCheck("unsqueeze", {x}, {{"dim", int64_t{-1}}}));
  EXPECT_TRUE(GradCheck("unsqueeze", {X({}, 2)}, {{"dim", int64_t{0}}}));
  EXPECT_TRUE(GradCheck("reshape", {x}, {{"shape", Ints{6, -1}}}));
  EXPECT_TRUE(GradCheck("expand", {X({3, 1}, 3)}, {{"size", Ints{2, 3, 4}}}));
}

TEST(ShapeGrad, LayoutCopies) {
  Tensor x = X({2, 3, 4}, 4);
  EXPECT_TRUE(GradCheck("permute", {x}, {{"dims", Ints{2, 0, 1}}}));
  EXPECT_TRUE(GradCheck("permute", {x}, {{"dims", Ints{-1, -2, -3}}}));
  EXPECT_TRUE(GradCheck("transpose", {x}, {{"dim0", int64_t{0}}, {"dim1", int64_t{-1}}}));
  EXPECT_TRUE(GradCheck("contiguous", {x}));
  EXPECT_TRUE(GradCheck("clone", {x}));
  EXPECT_TRUE(GradCheck("to_device", {x}, {{"device", std::string("cpu")}}));
  EXPECT_TRUE(GradCheck("to_dtype", {x}, {{"dtype", std::string("f64")}}));
  // Through f32 the forward rounds, so the differences need a larger step and tolerance.
  GradCheckOptions rounded;
  rounded.eps = 1e-3;
  rounded.rtol = 1e-3;
  rounded.atol = 1e-3;
  EXPECT_TRUE(GradCheck("to_dtype", {x}, {{"dtype", std::string("f32")}}, rounded));
  // BALANCED recomputes these memory-bound ops in backward.
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  EXPECT_TRUE(GradCheck("permute", {x}, {{"dims", Ints{1, 2, 0}}}, balanced));
}

TEST(ShapeGrad, CatAndStack) {
  Tensor a = X({2, 3}, 5), b = X({2, 1}, 6), c = X({2, 2}, 7);
  EXPECT_TRUE(GradCheck("cat", {a, b, c}, {{"dim", int64_t{1}}}));
  EXPECT_TRUE(GradCheck("cat", {a, X({1, 3}, 8)}, {{"dim", int64_t{-2}}}));
  EXPECT_TRUE(GradCheck("cat", {X({0}, 9), a, X({0, 3}, 9)}));
  // Only the float inputs are checked; the int input is promoted and gets no gradient.
  Tensor ints = Values(DType::kI32, {1, 3}, {1, 2, 3});
  GradCheckOptions first_only;
  first_only.wrt = {0};
  EXPECT_TRUE(GradCheck("cat", {a, ints}, {}, first_only));
  EXPECT_TRUE(GradCheck("stack", {a, X({2, 3}, 10)}, {{"dim", int64_t{1}}}));
  EXPECT_TRUE(GradCheck("stack", {a, X({2, 3}, 11), X({2, 3}, 12)}, {{"dim", int64_t{-1}}}));
  EXPECT_TRUE(GradCheck("stack", {X({}, 13), X({}, 14)}));
}

TEST(ShapeGrad, SplitAndChunk) {
  Tensor x = X({5, 4}, 15);
  EXPECT_TRUE(GradCheck("split", {x}, {{"split_size", int64_t{2}}}));
  EXPECT_TRUE(GradCheck("split", {x}, {{"split_size", Ints{1, 3}}, {"dim", int64_t{-1}}}));
  EXPECT_TRUE(GradCheck("chunk", {x}, {{"chunks", int64_t{3}}}));
  EXPECT_TRUE(GradCheck("chunk", {x}, {{"chunks", int64_t{2}}, {"dim", int64_t{1}}}));
}

// A piece nothing flows into contributes zeros: the gradient is the seed in one window only.
TEST(ShapeGrad, SplitWithOneOutputUsed) {
  AutodiffContext ctx(1, Checkpointing::kNone);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  Tensor x = X({4, 2}, 16);
  x.set_autograd(MakeLeafMeta(1, 100));
  auto pieces = TestDispatcher().Call("split", {x}, {{"split_size", int64_t{2}}}, env);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  ASSERT_EQ(pieces->size(), 2u);
  Tensor seed = Values(DType::kF64, {2, 2}, {1, 2, 3, 4});
  auto grads = TestDispatcher().Backward(ctx, {(*pieces)[1]}, {seed}, false, env);
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(grads->size(), 1u);
  EXPECT_TRUE(AllClose((*grads)[0].grad, {0, 0, 0, 0, 1, 2, 3, 4}, 0, 0));
}

TEST(ShapeGrad, NarrowAndSlice) {
  Tensor x = X({3, 7}, 17);
  EXPECT_TRUE(GradCheck("narrow", {x},
                        {{"dim", int64_t{1}}, {"start", int64_t{-4}}, {"length", int64_t{3}}}));
  EXPECT_TRUE(GradCheck(
      "slice", {x},
      {{"dim", int64_t{1}}, {"start", int64_t{1}}, {"end", int64_t{-1}}, {"step", int64_t{2}}}));
  EXPECT_TRUE(GradCheck("slice", {x}, {{"start", int64_t{-2}}}));
  EXPECT_TRUE(
      GradCheck("slice", {x}, {{"dim", int64_t{1}}, {"start", int64_t{5}}, {"end", int64_t{2}}}));
  EXPECT_TRUE(GradCheck(
      "slice_backward", {X({3, 2}, 18)},
      {{"dim", int64_t{1}}, {"start", int64_t{1}}, {"step", int64_t{3}}, {"size", int64_t{6}}}));
}

TEST(ShapeGrad, IndexSelectAndGather) {
  Tensor x = X({3, 4}, 19);
  // Repeated indices accumulate their gradients.
  Tensor index = Values(DType::kI64, {5}, {3, 0, 3, 1, 3});
  EXPECT_TRUE(GradCheck("index_select", {x, index}, {{"dim", int64_t{1}}}));
  EXPECT_TRUE(
      GradCheck("index_select", {x, Values(DType::kI32, {2}, {2, 2})}, {{"dim", int64_t{-2}}}));
  Tensor gidx = Values(DType::kI64, {2, 3}, {0, 2, 2, 1, 1, 0});
  EXPECT_TRUE(GradCheck("gather", {x, gidx}, {{"dim", int64_t{0}}}));
  EXPECT_TRUE(GradCheck("gather", {x, Values(DType::kI32, {3, 2}, {3, 3, 0, 1, 2, 2})},
                        {{"dim", int64_t{-1}}}));
  EXPECT_TRUE(GradCheck("index_add_internal", {x, Values(DType::kI64, {2}, {1, 1}), X({3, 2}, 20)},
                        {{"dim", int64_t{1}}}));
  EXPECT_TRUE(GradCheck("scatter_add_internal", {x, gidx, X({2, 3}, 21)}, {{"dim", int64_t{0}}}));
}

TEST(ShapeGrad, MaskedFill) {
  Tensor x = X({2, 3}, 22);
  Tensor mask = Values(DType::kBool, {2, 3}, {1, 0, 0, 1, 1, 0});
  EXPECT_TRUE(GradCheck("masked_fill", {x, mask}, {{"value", 2.5}}));
  // The input broadcasts up to the mask: its gradient is summed back over the new dim.
  EXPECT_TRUE(GradCheck("masked_fill", {X({3}, 23), mask}, {{"value", -1.0}}));
}

}  // namespace
}  // namespace tensord
