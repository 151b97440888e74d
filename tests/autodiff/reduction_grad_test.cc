// Finite-difference gradient checks (f64) for every differentiable reduction, plus the tie
// rules of max/min/amax/amin, which finite differences cannot see.
#include <gtest/gtest.h>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

using Dims = std::vector<int64_t>;

// Gradient of sum(op(x) * seed) with respect to x, through the autodiff engine.
Tensor Grad(const std::string& op, const Tensor& x, const AttrMap& attrs, const Tensor& seed) {
  AutodiffContext ctx(1, Checkpointing::kNone);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  Tensor input = x;
  input.set_autograd(MakeLeafMeta(1, 100));
  auto outs = TestDispatcher().Call(op, {input}, attrs, env);
  EXPECT_TRUE(outs.ok()) << outs.status();
  if (!outs.ok()) return Tensor();
  auto grads = TestDispatcher().Backward(ctx, {(*outs)[0]}, {seed}, false, env);
  EXPECT_TRUE(grads.ok()) << grads.status();
  if (!grads.ok() || grads->empty()) return Tensor();
  return (*grads)[0].grad;
}

TEST(ReductionGrad, SumAndMean) {
  Tensor x = Random(DType::kF64, {2, 3, 4}, 1);
  for (const std::string op : {"sum", "mean"}) {
    EXPECT_TRUE(GradCheck(op, {x}));
    EXPECT_TRUE(GradCheck(op, {x}, {{"dim", Dims{1}}}));
    EXPECT_TRUE(GradCheck(op, {x}, {{"dim", Dims{0, 2}}, {"keepdim", true}}));
    EXPECT_TRUE(GradCheck(op, {x}, {{"dim", Dims{-1}}}));
  }
  // A dtype attribute: f32 input, f64 output; the gradient is cast back.
  Tensor f = Random(DType::kF32, {3, 2}, 2);
  Tensor g = Grad("mean", f, {{"dtype", std::string("f64")}, {"dim", Dims{0}}},
                  Values(DType::kF64, {2}, {3, 6}));
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.dtype(), DType::kF32);
  EXPECT_TRUE(AllClose(g, {1, 2, 1, 2, 1, 2}));
}

TEST(ReductionGrad, MaxMinFullAndAlongDim) {
  Tensor x = Random(DType::kF64, {3, 4}, 3);
  for (const std::string op : {"max", "min"}) {
    EXPECT_TRUE(GradCheck(op, {x}));
    EXPECT_TRUE(GradCheck(op, {x}, {{"dim", int64_t{1}}}));
    EXPECT_TRUE(GradCheck(op, {x}, {{"dim", int64_t{-2}}, {"keepdim", true}}));
  }
  Tensor scalar = Values(DType::kF64, {}, {2.5});
  EXPECT_TRUE(GradCheck("max", {scalar}, {{"dim", int64_t{0}}}));
}

TEST(ReductionGrad, AMaxAMin) {
  Tensor x = Random(DType::kF64, {2, 3, 4}, 4);
  for (const std::string op : {"amax", "amin"}) {
    EXPECT_TRUE(GradCheck(op, {x}));
    EXPECT_TRUE(GradCheck(op, {x}, {{"dim", Dims{1}}}));
    EXPECT_TRUE(GradCheck(op, {x}, {{"dim", Dims{0, 2}}, {"keepdim", true}}));
  }
}

TEST(ReductionGrad, VarStd) {
  Tensor x = Random(DType::kF64, {3, 5}, 5);
  for (const std::string op : {"var", "std"}) {
    EXPECT_TRUE(GradCheck(op, {x}));
    EXPECT_TRUE(GradCheck(op, {x}, {{"dim", Dims{1}}}));
    EXPECT_TRUE(GradCheck(op, {x}, {{"dim", Dims{0}}, {"correction", 0.0}, {"keepdim", true}}));
    EXPECT_TRUE(GradCheck(op, {x}, {{"dim", Dims{-1}}, {"correction", 2.0}}));
  }
  Tensor y = Random(DType::kF64, {2, 3, 2}, 6);
  EXPECT_TRUE(GradCheck("std", {y}, {{"dim", Dims{0, 2}}, {"unbiased", false}}));
}

TEST(ReductionGrad, LogSumExp) {
  Tensor x = Random(DType::kF64, {3, 4}, 7, -3, 3);
  EXPECT_TRUE(GradCheck("logsumexp", {x}));
  EXPECT_TRUE(GradCheck("logsumexp", {x}, {{"dim", Dims{1}}}));
  EXPECT_TRUE(GradCheck("logsumexp", {x}, {{"dim", Dims{0}}, {"keepdim", true}}));
}

TEST(ReductionGrad, BalancedCheckpointing) {
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  Tensor x = Random(DType::kF64, {3, 4}, 8);
  EXPECT_TRUE(GradCheck("max", {x}, {{"dim", int64_t{1}}}, balanced));
  EXPECT_TRUE(GradCheck("var", {x}, {{"dim", Dims{0}}}, balanced));
  EXPECT_TRUE(GradCheck("logsumexp", {x}, {{"dim", Dims{1}}}, balanced));
  EXPECT_TRUE(GradCheck("amin", {x}, {}, balanced));
}

TEST(ReductionGrad, TiesFollowPyTorch) {
  Tensor x = Values(DType::kF64, {2, 3}, {5, 1, 5, 2, 2, 0});
  // amax/amin split the gradient evenly among tied extrema.
  EXPECT_TRUE(AllClose(Grad("amax", x, {{"dim", Dims{1}}}, Values(DType::kF64, {2}, {1, 4})),
                       {0.5, 0, 0.5, 2, 2, 0}));
  EXPECT_TRUE(AllClose(Grad("amin", x, {}, Values(DType::kF64, {}, {1})), {0, 0, 0, 0, 0, 1}));
  // max() without dim spreads evenly too; max(dim) sends everything to the first index.
  EXPECT_TRUE(AllClose(Grad("max", x, {}, Values(DType::kF64, {}, {1})), {0.5, 0, 0.5, 0, 0, 0}));
  EXPECT_TRUE(AllClose(Grad("max", x, {{"dim", int64_t{1}}}, Values(DType::kF64, {2}, {1, 4})),
                       {1, 0, 0, 4, 0, 0}));
  EXPECT_TRUE(AllClose(Grad("min", x, {{"dim", int64_t{0}}}, Values(DType::kF64, {3}, {1, 2, 3})),
                       {0, 2, 0, 1, 0, 3}));
}

TEST(ReductionGrad, IndicesAndArgsAreNotDifferentiable) {
  AutodiffContext ctx(1, Checkpointing::kNone);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  Tensor x = Random(DType::kF64, {2, 3}, 9);
  x.set_autograd(MakeLeafMeta(1, 100));
  auto mx = TestDispatcher().Call("max", {x}, {{"dim", int64_t{1}}}, env);
  ASSERT_TRUE(mx.ok()) << mx.status();
  EXPECT_NE((*mx)[0].autograd(), nullptr);
  EXPECT_EQ((*mx)[1].autograd(), nullptr);
  for (const std::string op : {"argmax", "argmin", "all", "any"}) {
    auto out = TestDispatcher().Call(op, {x}, {}, env);
    ASSERT_TRUE(out.ok()) << op << ": " << out.status();
    EXPECT_EQ((*out)[0].autograd(), nullptr) << op;
  }
}

}  // namespace
}  // namespace tensord
