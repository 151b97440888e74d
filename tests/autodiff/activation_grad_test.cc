// Gradient checks (f64 finite differences) for every activation, their conventions at kinks,
// and a chain of memory-bound ops under BALANCED checkpointing against NONE.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/autodiff/elementwise_grad_util.h"

namespace tensord {
namespace {
using namespace testing;

Tensor X(Shape shape, uint32_t seed, double lo = -2, double hi = 2) {
  return Random(DType::kF64, std::move(shape), seed, lo, hi);
}

TEST(ActivationGrad, Pointwise) {
  const Shape s = {3, 4};
  EXPECT_TRUE(GradCheck("relu", {AwayFromZero(s, 1)}));
  EXPECT_TRUE(GradCheck("sigmoid", {X(s, 2)}));
  EXPECT_TRUE(GradCheck("tanh", {X(s, 3)}));
  EXPECT_TRUE(GradCheck("gelu", {X(s, 4, -3, 3)}));
  EXPECT_TRUE(GradCheck("gelu", {X(s, 5, -3, 3)}, {{"approximate", std::string("tanh")}}));
  EXPECT_TRUE(GradCheck("silu", {X(s, 6, -4, 4)}));
  EXPECT_TRUE(GradCheck("softplus", {X(s, 7)}));
  // beta * x crosses the threshold inside the sampled range: both branches are checked.
  EXPECT_TRUE(GradCheck("softplus", {X(s, 8)}, {{"beta", 2.0}, {"threshold", 1.0}}));
  EXPECT_TRUE(GradCheck("leaky_relu", {AwayFromZero(s, 9)}));
  EXPECT_TRUE(GradCheck("leaky_relu", {AwayFromZero(s, 10)}, {{"negative_slope", 0.2}}));
  EXPECT_TRUE(GradCheck("elu", {AwayFromZero(s, 11)}));
  EXPECT_TRUE(GradCheck("elu", {AwayFromZero(s, 12)}, {{"alpha", 1.5}}));
  EXPECT_TRUE(GradCheck("sigmoid", {X({}, 13)}));
  EXPECT_TRUE(GradCheck("gelu", {X({0, 2}, 14)}));
}

TEST(ActivationGrad, SoftmaxAlongEveryDim) {
  for (const char* op : {"softmax", "log_softmax"}) {
    Tensor x = X({3, 4}, 20);
    for (int64_t dim : {0, 1, -1, -2}) {
      EXPECT_TRUE(GradCheck(op, {x}, {{"dim", dim}})) << op << " dim " << dim;
    }
    EXPECT_TRUE(GradCheck(op, {X({2, 3, 4}, 21)}, {{"dim", int64_t{1}}})) << op;
    EXPECT_TRUE(GradCheck(op, {X({5}, 22)}, {{"dim", int64_t{0}}})) << op;
    EXPECT_TRUE(GradCheck(op, {X({}, 23)}, {{"dim", int64_t{-1}}})) << op;
  }
}

TEST(ActivationGrad, ConventionsAtKinks) {
  const Tensor x = Values(DType::kF64, {3}, {-1, 0, 2});
  // relu'(0) = 0; leaky_relu'(0) = negative_slope; elu'(0) = alpha (the x > 0 branch is
  // strict in PyTorch's kernels).
  EXPECT_TRUE(AllClose(Gradients("relu", {x})[0], {0, 0, 1}));
  EXPECT_TRUE(AllClose(Gradients("leaky_relu", {x}, {{"negative_slope", 0.2}})[0], {0.2, 0.2, 1}));
  EXPECT_TRUE(AllClose(Gradients("elu", {x}, {{"alpha", 1.5}})[0], {1.5 * std::exp(-1.0), 1.5, 1}));
  // softmax's gradient sums to zero along dim (the output always sums to one).
  std::vector<Tensor> g = Gradients("softmax", {X({2, 3}, 30)}, {{"dim", int64_t{1}}});
  EXPECT_TRUE(AllClose(g[0], std::vector<double>(6, 0.0), 0, 1e-12));
}

TEST(ActivationGrad, BalancedCheckpointingRecomputes) {
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  EXPECT_TRUE(GradCheck("sigmoid", {X({2, 3}, 40)}, {}, balanced));
  EXPECT_TRUE(GradCheck("relu", {AwayFromZero({2, 3}, 41)}, {}, balanced));
  EXPECT_TRUE(GradCheck("gelu", {X({2, 3}, 42)}, {}, balanced));
  EXPECT_TRUE(GradCheck("softmax", {X({2, 3}, 43)}, {{"dim", int64_t{-1}}}, balanced));
  EXPECT_TRUE(GradCheck("log_softmax", {X({2, 3}, 44)}, {{"dim", int64_t{0}}}, balanced));
}

// x, w → sum(log(softmax(gelu(tanh(x * w)))) * w): every intermediate is memory-bound, so
// BALANCED keeps only the leaves and recomputes the rest through its producers.
struct ChainResult {
  std::vector<Tensor> grads;
  int64_t saved_bytes = 0;
};

ChainResult RunChain(Checkpointing checkpointing, const Tensor& x0, const Tensor& w0) {
  ChainResult result;
  AutodiffContext ctx(1, checkpointing);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  Tensor x = x0, w = w0;
  x.set_autograd(MakeLeafMeta(1, 100));
  w.set_autograd(MakeLeafMeta(1, 101));
  auto call = [&](const std::string& op, std::vector<Tensor> in, AttrMap attrs = {}) {
    auto r = TestDispatcher().Call(op, std::move(in), attrs, env);
    EXPECT_TRUE(r.ok()) << op << ": " << r.status();
    return r.ok() ? (*r)[0] : Tensor();
  };
  Tensor h = call("mul", {x, w});
  h = call("tanh", {h});
  h = call("gelu", {h}, {{"approximate", std::string("tanh")}});
  h = call("softmax", {h}, {{"dim", int64_t{1}}});
  h = call("log", {h});
  h = call("mul", {h, w});
  h = call("sum", {h});
  result.saved_bytes = ctx.SavedBytes();
  auto leaves = TestDispatcher().Backward(ctx, {h}, {}, false, env);
  EXPECT_TRUE(leaves.ok()) << leaves.status();
  if (!leaves.ok()) return result;
  result.grads.resize(2);
  for (const LeafGradient& g : *leaves) result.grads[g.leaf->tensor_id - 100] = g.grad;
  return result;
}

TEST(ActivationGrad, BalancedChainMatchesNoneWithLessSaved) {
  const Tensor x = X({3, 5}, 50), w = X({3, 5}, 51);
  ChainResult none = RunChain(Checkpointing::kNone, x, w);
  ChainResult balanced = RunChain(Checkpointing::kBalanced, x, w);
  ASSERT_EQ(none.grads.size(), 2u);
  ASSERT_EQ(balanced.grads.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(AllClose(balanced.grads[i], none.grads[i], 1e-12, 1e-14)) << "input " << i;
  }
  EXPECT_LT(balanced.saved_bytes, none.saved_bytes);
}

}  // namespace
}  // namespace tensord
