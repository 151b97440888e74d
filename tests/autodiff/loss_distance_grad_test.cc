// Finite-difference gradient checks (f64) for smooth_l1_loss, huber_loss, kl_div and
// cosine_similarity: every reduction, both operands (summed over broadcast dims), the
// attributes, and the eps floor of cosine_similarity, whose gradient is that of the unfloored
// norm as in PyTorch.
#include <gtest/gtest.h>

#include <cmath>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

AttrMap With(AttrMap a, const std::string& reduction) {
  a["reduction"] = reduction;
  return a;
}

TEST(LossDistanceGrad, SmoothL1AndHuber) {
  Tensor x = Random(DType::kF64, {3, 4}, 1, -3, 3);
  Tensor t = Random(DType::kF64, {3, 4}, 2, -3, 3);
  Tensor row = Random(DType::kF64, {4}, 3, -3, 3);
  for (const std::string r : {"none", "mean", "sum"}) {
    SCOPED_TRACE(r);
    for (double beta : {1.0, 0.5, 2.5, 0.0}) {
      EXPECT_TRUE(GradCheck("smooth_l1_loss", {x, t}, With({{"beta", beta}}, r)));
      EXPECT_TRUE(GradCheck("smooth_l1_loss", {x, row}, With({{"beta", beta}}, r)));
    }
    for (double delta : {1.0, 0.3, 2.5}) {
      EXPECT_TRUE(GradCheck("huber_loss", {x, t}, With({{"delta", delta}}, r)));
      EXPECT_TRUE(GradCheck("huber_loss", {row, x}, With({{"delta", delta}}, r)));
    }
  }
}

TEST(LossDistanceGrad, KlDiv) {
  Tensor logp = Random(DType::kF64, {3, 4}, 4, -3, -0.1);
  Tensor p = Random(DType::kF64, {3, 4}, 5, 0.05, 1);
  Tensor logt = Random(DType::kF64, {3, 4}, 6, -3, 0);
  Tensor row = Random(DType::kF64, {4}, 7, 0.05, 1);
  for (const std::string r : {"none", "mean", "sum", "batchmean"}) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(GradCheck("kl_div", {logp, p}, With({}, r)));
    EXPECT_TRUE(GradCheck("kl_div", {logp, logt}, With({{"log_target", true}}, r)));
    EXPECT_TRUE(GradCheck("kl_div", {logp, row}, With({}, r)));
  }
}

TEST(LossDistanceGrad, KlDivAtZeroTargetsFollowsPyTorch) {
  // The input gradient is -target (0 at a zero target); the target gradient goes through
  // xlogy(t, t), whose t / t term is NaN at t = 0 in PyTorch too.
  AutodiffContext ctx(1, Checkpointing::kNone);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  Tensor x = Values(DType::kF64, {2}, {-1, -2});
  Tensor t = Values(DType::kF64, {2}, {0, 0.5});
  x.set_autograd(MakeLeafMeta(1, 100));
  t.set_autograd(MakeLeafMeta(1, 101));
  auto out = TestDispatcher().Call("kl_div", {x, t}, {{"reduction", std::string("sum")}}, env);
  ASSERT_TRUE(out.ok()) << out.status();
  auto grads =
      TestDispatcher().Backward(ctx, {(*out)[0]}, {Values(DType::kF64, {}, {1})}, false, env);
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(grads->size(), 2u);
  for (const LeafGradient& g : *grads) {
    if (g.leaf->tensor_id == 100) {
      EXPECT_TRUE(AllClose(g.grad, {0, -0.5}));
    } else {
      EXPECT_TRUE(AllClose(g.grad, {std::nan(""), std::log(0.5) + 1 + 2}));
    }
  }
}

TEST(LossDistanceGrad, CosineSimilarity) {
  Tensor a = Random(DType::kF64, {3, 4}, 8);
  Tensor b = Random(DType::kF64, {3, 4}, 9);
  Tensor row = Random(DType::kF64, {4}, 10);
  EXPECT_TRUE(GradCheck("cosine_similarity", {a, b}));
  EXPECT_TRUE(GradCheck("cosine_similarity", {a, b}, {{"dim", int64_t{0}}}));
  EXPECT_TRUE(GradCheck("cosine_similarity", {a, row}, {{"dim", int64_t{-1}}}));
  Tensor c = Random(DType::kF64, {2, 3, 2}, 11);
  EXPECT_TRUE(GradCheck("cosine_similarity", {c, c}, {{"dim", int64_t{1}}}));
  Tensor d = Random(DType::kF64, {2, 3, 2}, 12);
  EXPECT_TRUE(GradCheck("cosine_similarity", {c, d}, {{"dim", int64_t{1}}, {"eps", 0.1}}));
  // An operand whose norm is below eps: the value uses eps, but the gradient is that of the
  // unfloored norm, as PyTorch (which floors the norms in place under no_grad). With
  // x1 = (0.3, -0.4) (norm 0.5), eps = 1 and u2 = x2 / |x2|:
  // d/dx1 = u2 / eps - (x1 . u2) / eps^2 * x1 / |x1| = (1.3, 1.6) / sqrt(5).
  AutodiffContext ctx(1, Checkpointing::kNone);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  Tensor small = Values(DType::kF64, {1, 2}, {0.3, -0.4});
  Tensor other = Values(DType::kF64, {1, 2}, {1.0, 2.0});
  small.set_autograd(MakeLeafMeta(1, 100));
  auto out = TestDispatcher().Call("cosine_similarity", {small, other}, {{"eps", 1.0}}, env);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(AllClose((*out)[0], {-0.5 / std::sqrt(5.0)}));
  auto grads =
      TestDispatcher().Backward(ctx, {(*out)[0]}, {Values(DType::kF64, {1}, {1})}, false, env);
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(grads->size(), 1u);
  EXPECT_TRUE(AllClose((*grads)[0].grad, {1.3 / std::sqrt(5.0), 1.6 / std::sqrt(5.0)}));
  // The other operand's norm is above eps: an ordinary gradient.
  GradCheckOptions wrt_other;
  wrt_other.wrt = {1};
  EXPECT_TRUE(GradCheck("cosine_similarity", {Values(DType::kF64, {1, 2}, {0.3, -0.4}), other},
                        {{"eps", 1.0}}, wrt_other));
}

TEST(LossDistanceGrad, BalancedCheckpointing) {
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  Tensor x = Random(DType::kF64, {4, 3}, 13, -2, 2);
  Tensor y = Random(DType::kF64, {4, 3}, 14, -2, 2);
  Tensor p = Random(DType::kF64, {4, 3}, 15, 0.05, 1);
  EXPECT_TRUE(GradCheck("smooth_l1_loss", {x, y}, {{"beta", 0.5}}, balanced));
  EXPECT_TRUE(GradCheck("huber_loss", {x, y}, {}, balanced));
  EXPECT_TRUE(GradCheck("kl_div", {x, p}, {{"reduction", std::string("batchmean")}}, balanced));
  EXPECT_TRUE(GradCheck("cosine_similarity", {x, y}, {}, balanced));
}

}  // namespace
}  // namespace tensord
