// Helpers for the elementwise and activation gradient tests: exact gradients at chosen points
// (where finite differences cannot look: ties, kinks, boundaries) and inputs kept away from
// non-differentiable points.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "tests/support/op_test_util.h"

namespace tensord::testing {

// Autodiff gradients of sum(op(inputs)) for the float inputs (undefined for the others).
inline std::vector<Tensor> Gradients(const std::string& op, const std::vector<Tensor>& inputs,
                                     const AttrMap& attrs = {},
                                     Checkpointing checkpointing = Checkpointing::kNone) {
  AutodiffContext ctx(1, checkpointing);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  std::vector<Tensor> args = inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (IsFloat(args[i].dtype())) args[i].set_autograd(MakeLeafMeta(1, 100 + i));
  }
  std::vector<Tensor> grads(inputs.size());
  auto out = TestDispatcher().Call(op, args, attrs, env);
  EXPECT_TRUE(out.ok()) << op << ": " << out.status();
  if (!out.ok()) return grads;
  const Tensor& y = (*out)[0];
  Tensor seed = Values(y.dtype(), y.shape(), std::vector<double>(y.numel(), 1.0));
  auto leaves = TestDispatcher().Backward(ctx, {y}, {seed}, false, env);
  EXPECT_TRUE(leaves.ok()) << op << " backward: " << leaves.status();
  if (!leaves.ok()) return grads;
  for (const LeafGradient& g : *leaves) grads[g.leaf->tensor_id - 100] = g.grad;
  return grads;
}

// Random f64 values with |x| in [gap, gap + 1): away from a kink at 0.
inline Tensor AwayFromZero(Shape shape, uint32_t seed, double gap = 0.1) {
  std::vector<double> v = Random(DType::kF64, shape, seed).ToDoubles();
  for (double& x : v) x = std::copysign(gap + std::fabs(x), x);
  return Values(DType::kF64, std::move(shape), v);
}

// Random f64 values in [lo, hi) whose fractional part stays in [0.2, 0.8]: away from the
// jumps of floor, ceil, round, trunc and frac.
inline Tensor AwayFromIntegers(Shape shape, uint32_t seed, double lo = -3, double hi = 3) {
  std::vector<double> v = Random(DType::kF64, shape, seed, lo, hi).ToDoubles();
  for (double& x : v) x = std::floor(x) + 0.2 + 0.6 * (x - std::floor(x));
  return Values(DType::kF64, std::move(shape), v);
}

}  // namespace tensord::testing
