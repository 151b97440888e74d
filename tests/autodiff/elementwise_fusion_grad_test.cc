// fused_elementwise's backward rule: f64 gradient checks of expressions over every function of
// the expression language (broadcast leaves, a leaf read twice, parameters), the gradients of
// the unfused calls it stands for (bit for bit along a chain), BALANCED checkpointing, and the
// inputs that need no gradient.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/ops/elementwise_fusion.h"
#include "tests/autodiff/elementwise_grad_util.h"

namespace tensord {
namespace {
using namespace testing;

AttrMap Steps(const std::string& steps) { return {{fusion::kStepsAttr, steps}}; }

Tensor X(Shape shape, uint32_t seed, double lo = -2, double hi = 2) {
  return Random(DType::kF64, std::move(shape), seed, lo, hi);
}

// Bit for bit: same dtype, shape and bytes.
::testing::AssertionResult SameBits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return ::testing::AssertionFailure() << "undefined";
  if (a.meta().dtype != b.meta().dtype || a.shape() != b.shape()) {
    return ::testing::AssertionFailure() << "types differ";
  }
  const std::vector<double> x = a.ToDoubles(), y = b.ToDoubles();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0) {
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(ElementwiseFusionGrad, ArithmeticWithBroadcastLeaves) {
  // tanh(x * w + b), w per column and b per row: the rule sums their gradients down.
  EXPECT_TRUE(GradCheck(fusion::kElementwiseOp, {X({3, 4}, 1), X({4}, 2), X({3, 1}, 3)},
                        Steps("$0,$1,mul,$2,add:1,tanh")));
  // A leaf read three times, and division.
  EXPECT_TRUE(GradCheck(fusion::kElementwiseOp, {X({5}, 4), X({5}, 5, 1, 2)},
                        Steps("$0,$0,mul,$1,div,$0,sub:1,$1,$0,add:1,mul")));
  // add and sub with alpha.
  EXPECT_TRUE(GradCheck(fusion::kElementwiseOp, {X({2, 3}, 6), X({2, 3}, 7)},
                        Steps("$0,$1,add:2.5,$1,sub:0.5,$0,mul")));
}

TEST(ElementwiseFusionGrad, EveryFunction) {
  // Each function applied to a value the rule recomputes (x + y) and to an input, operands kept
  // away from kinks and from the domain edges of log, sqrt and rsqrt.
  const Tensor x = AwayFromZero({2, 5}, 11), y = X({2, 5}, 13, 0.05, 0.06);
  const Tensor p = X({2, 5}, 10, 0.5, 2), q = X({2, 5}, 14, 0.1, 0.2);
  for (const char* fn :
       {"neg", "abs", "square", "exp", "relu", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh",
        "leaky_relu:0.2", "elu:1.5", "clamp:-0.5:0.5", "clamp:-inf:0.3", "clamp:-0.2:inf"}) {
    EXPECT_TRUE(GradCheck(fusion::kElementwiseOp, {x, y},
                          Steps(absl::StrCat("$0,$1,add:1,", fn, ",$0,mul"))))
        << fn;
    EXPECT_TRUE(GradCheck(fusion::kElementwiseOp, {x}, Steps(absl::StrCat("$0,", fn, ",$0,mul"))))
        << fn;
  }
  for (const char* fn : {"log", "sqrt", "rsqrt", "reciprocal"}) {
    EXPECT_TRUE(
        GradCheck(fusion::kElementwiseOp, {p, q}, Steps(absl::StrCat("$0,$1,add:1,", fn, ",exp"))))
        << fn;
    EXPECT_TRUE(GradCheck(fusion::kElementwiseOp, {p}, Steps(absl::StrCat("$0,", fn, ",exp"))))
        << fn;
  }
  // maximum and minimum of operands that never tie, one of them recomputed.
  const Tensor a = X({2, 5}, 12), b = Values(DType::kF64, {5}, {0.05, -0.35, 0.65, -0.95, 1.25});
  EXPECT_TRUE(GradCheck(fusion::kElementwiseOp, {a, b},
                        Steps("$0,$1,maximum,$0,$1,minimum,mul,$0,$1,mul,$1,div,maximum")));
}

// The gradients of the unfused calls of relu(x*w + b) * x - 0.5 (x a leaf twice).
std::vector<Tensor> Unfused(const std::vector<Tensor>& leaves, Checkpointing checkpointing,
                            bool chain) {
  AutodiffContext ctx(1, checkpointing);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  std::vector<Tensor> in = leaves;
  for (size_t i = 0; i < in.size(); ++i) in[i].set_autograd(MakeLeafMeta(1, 100 + i));
  auto call = [&](const std::string& op, std::vector<Tensor> operands) {
    auto r = TestDispatcher().Call(op, std::move(operands), {}, env);
    EXPECT_TRUE(r.ok()) << op << ": " << r.status();
    return r.ok() ? (*r)[0] : Tensor();
  };
  Tensor h = call("relu", {call("add", {call("mul", {in[0], in[1]}), in[2]})});
  if (!chain) h = call("sub", {call("mul", {h, in[0]}), ScalarOperand(0.5)});
  Tensor seed = Values(h.dtype(), h.shape(), std::vector<double>(h.numel(), 1.0));
  auto grads = TestDispatcher().Backward(ctx, {h}, {seed}, false, env);
  EXPECT_TRUE(grads.ok()) << grads.status();
  std::vector<Tensor> out(in.size());
  if (grads.ok()) {
    for (const LeafGradient& g : *grads) out[g.leaf->tensor_id - 100] = g.grad;
  }
  return out;
}

TEST(ElementwiseFusionGrad, GivesTheUnfusedCallsGradients) {
  const std::vector<Tensor> leaves = {AwayFromZero({4, 3}, 20), X({3}, 21), X({4, 1}, 22)};
  for (Checkpointing c : {Checkpointing::kNone, Checkpointing::kBalanced}) {
    // A chain: every rule runs on the same values in the same order, so the bits are the same.
    std::vector<Tensor> fused =
        Gradients(fusion::kElementwiseOp, leaves, Steps("$0,$1,mul,$2,add:1,relu"), c);
    std::vector<Tensor> plain = Unfused(leaves, c, true);
    for (size_t i = 0; i < leaves.size(); ++i) EXPECT_TRUE(SameBits(fused[i], plain[i])) << i;
    // x read twice: its two gradients are summed in another order, so to rounding.
    std::vector<Tensor> wider = {leaves[0], leaves[1], leaves[2], Values(DType::kF64, {}, {0.5})};
    fused = Gradients(fusion::kElementwiseOp, wider,
                      Steps("$0,$1,mul,$2,add:1,relu,$0,mul,$3,sub:1"), c);
    plain = Unfused(leaves, c, false);
    for (size_t i = 0; i < leaves.size(); ++i) {
      EXPECT_TRUE(AllClose(fused[i], plain[i], 1e-14, 1e-15)) << i;
    }
  }
}

TEST(ElementwiseFusionGrad, BalancedCheckpointingRecomputesTheFusedCall) {
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  EXPECT_TRUE(GradCheck(fusion::kElementwiseOp, {X({3, 4}, 30), X({4}, 31)},
                        Steps("$0,$1,sub:1,sigmoid,$0,mul,$1,add:1"), balanced));
}

TEST(ElementwiseFusionGrad, InputsThatNeedNoGradientGetNone) {
  // Only the first input is a leaf: the rule is asked for no gradient of the second, yet the
  // values above it (log, exp), which mul's rule reads, are still recomputed.
  GradCheckOptions first;
  first.wrt = {0};
  EXPECT_TRUE(GradCheck(fusion::kElementwiseOp, {X({6}, 40), X({6}, 41, 0.5, 2)},
                        Steps("$1,log,exp,$0,mul"), first));
}

}  // namespace
}  // namespace tensord
