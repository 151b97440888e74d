// Finite-difference gradient checks (f64) for prod, norm, cumsum and cumprod, including inputs
// with one and several zeros (where result / x would be 0 / 0), plus the values PyTorch gives
// where finite differences cannot decide: a zero norm, p = 1 at zero, ties of the inf norm.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

using Dims = std::vector<int64_t>;
constexpr double kInf = std::numeric_limits<double>::infinity();

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

TEST(ProductNormScanGrad, Prod) {
  Tensor x = Random(DType::kF64, {3, 4}, 1, 0.5, 1.5);
  EXPECT_TRUE(GradCheck("prod", {x}));
  EXPECT_TRUE(GradCheck("prod", {x}, {{"dim", int64_t{1}}}));
  EXPECT_TRUE(GradCheck("prod", {x}, {{"dim", int64_t{-2}}, {"keepdim", true}}));
  Tensor y = Random(DType::kF64, {2, 3, 2}, 2, -1.5, 1.5);
  EXPECT_TRUE(GradCheck("prod", {y}, {{"dim", int64_t{1}}}));
  EXPECT_TRUE(GradCheck("prod", {Values(DType::kF64, {}, {2.5})}));
  EXPECT_TRUE(GradCheck("prod", {Values(DType::kF64, {}, {2.5})}, {{"dim", int64_t{0}}}));
}

TEST(ProductNormScanGrad, ProdWithZeros) {
  // Rows: one zero, two zeros, no zero; the full product has three zeros.
  Tensor x = Values(DType::kF64, {3, 3}, {2, 0, 3, 0, 5, 0, 1.5, -2, 0.5});
  EXPECT_TRUE(GradCheck("prod", {x}, {{"dim", int64_t{1}}}));
  EXPECT_TRUE(GradCheck("prod", {x}, {{"dim", int64_t{0}}}));
  EXPECT_TRUE(GradCheck("prod", {x}));
  Tensor one_zero = Values(DType::kF64, {4}, {2, 3, 0, -1.5});
  EXPECT_TRUE(GradCheck("prod", {one_zero}));
  // The element that is zero receives the product of the others; the rest get 0.
  EXPECT_TRUE(AllClose(Grad("prod", one_zero, {}, Values(DType::kF64, {}, {2})), {0, 0, -18, 0}));
  EXPECT_TRUE(AllClose(Grad("prod", x, {{"dim", int64_t{1}}}, Values(DType::kF64, {3}, {1, 1, 1})),
                       {0, 6, 0, 0, 0, 0, -1, 0.75, -3}));
}

TEST(ProductNormScanGrad, ProdWithDtypeAttribute) {
  // f32 input, f64 product: the gradient comes back in f32.
  Tensor x = Values(DType::kF32, {2, 2}, {2, 3, 0, 4});
  Tensor g = Grad("prod", x, {{"dim", int64_t{1}}, {"dtype", std::string("f64")}},
                  Values(DType::kF64, {2}, {1, 2}));
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.dtype(), DType::kF32);
  EXPECT_TRUE(AllClose(g, {3, 2, 8, 0}));
}

TEST(ProductNormScanGrad, Norm) {
  Tensor x = Random(DType::kF64, {3, 4}, 3, -2, 2);
  for (double p : {2.0, 1.0, 3.0, 1.5, 0.5, -1.0, -2.5, kInf, -kInf, 0.0}) {
    SCOPED_TRACE("p " + std::to_string(p));
    EXPECT_TRUE(GradCheck("norm", {x}, {{"p", p}}));
    EXPECT_TRUE(GradCheck("norm", {x}, {{"p", p}, {"dim", Dims{1}}}));
    EXPECT_TRUE(GradCheck("norm", {x}, {{"p", p}, {"dim", Dims{0}}, {"keepdim", true}}));
  }
  Tensor y = Random(DType::kF64, {2, 3, 2}, 4, -2, 2);
  EXPECT_TRUE(GradCheck("norm", {y}, {{"dim", Dims{0, 2}}}));
  EXPECT_TRUE(GradCheck("norm", {y}, {{"p", 3.0}, {"dim", Dims{-1, 0}}, {"keepdim", true}}));
}

TEST(ProductNormScanGrad, NormAtZerosAndTiesFollowsPyTorch) {
  Tensor x = Values(DType::kF64, {2, 3}, {0, 0, 0, 3, 0, -4});
  Tensor seed = Values(DType::kF64, {2}, {1, 10});
  // p = 2: a zero norm has gradient 0 (not NaN); elsewhere x / |x|.
  EXPECT_TRUE(AllClose(Grad("norm", x, {{"dim", Dims{1}}}, seed), {0, 0, 0, 6, 0, -8}));
  // p = 1: sign(x), 0 at x = 0.
  EXPECT_TRUE(
      AllClose(Grad("norm", x, {{"dim", Dims{1}}, {"p", 1.0}}, seed), {0, 0, 0, 10, 0, -10}));
  // p = 3: x |x| g / n^2, and 0 for the zero norm.
  const double n2 = std::pow(91.0, 2.0 / 3.0);  // (27 + 64)^(2/3)
  EXPECT_TRUE(AllClose(Grad("norm", x, {{"dim", Dims{1}}, {"p", 3.0}}, seed),
                       {0, 0, 0, 90 / n2, 0, -160 / n2}));
  // p = 0: the count of non-zeros has zero gradient.
  EXPECT_TRUE(AllClose(Grad("norm", x, {{"dim", Dims{1}}, {"p", 0.0}}, seed), {0, 0, 0, 0, 0, 0}));
  // p = inf: shared evenly among the tied largest |x|, with their signs.
  Tensor t = Values(DType::kF64, {4}, {2, -2, 1, 2});
  EXPECT_TRUE(
      AllClose(Grad("norm", t, {{"p", kInf}}, Values(DType::kF64, {}, {3})), {1, -1, 0, 1}));
  EXPECT_TRUE(
      AllClose(Grad("norm", t, {{"p", -kInf}}, Values(DType::kF64, {}, {3})), {0, 0, 3, 0}));
}

TEST(ProductNormScanGrad, Cumsum) {
  Tensor x = Random(DType::kF64, {3, 4}, 5);
  for (int64_t dim : {0, 1, -1}) EXPECT_TRUE(GradCheck("cumsum", {x}, {{"dim", dim}}));
  Tensor y = Random(DType::kF64, {2, 3, 2}, 6);
  EXPECT_TRUE(GradCheck("cumsum", {y}, {{"dim", int64_t{1}}}));
  EXPECT_TRUE(GradCheck("cumsum", {Values(DType::kF64, {}, {1.5})}, {{"dim", int64_t{0}}}));
  // The gradient is the reversed running sum of the seed.
  EXPECT_TRUE(AllClose(Grad("cumsum", Random(DType::kF64, {4}, 7), {{"dim", int64_t{0}}},
                            Values(DType::kF64, {4}, {1, 2, 3, 4})),
                       {10, 9, 7, 4}));
}

TEST(ProductNormScanGrad, CumprodWithAndWithoutZeros) {
  Tensor x = Random(DType::kF64, {3, 4}, 8, 0.5, 1.5);
  for (int64_t dim : {0, 1, -1}) EXPECT_TRUE(GradCheck("cumprod", {x}, {{"dim", dim}}));
  Tensor y = Random(DType::kF64, {2, 3, 2}, 9, -1.5, 1.5);
  EXPECT_TRUE(GradCheck("cumprod", {y}, {{"dim", int64_t{1}}}));
  // Lines with a zero first, in the middle, last, two zeros, and no zero.
  Tensor z = Values(DType::kF64, {5, 4},
                    {0, 2, 3, 0.5, 2, 0, 3, -1, 2, 3, -1, 0, 0, 2, 0, 3, 1.5, -2, 0.5, 3});
  EXPECT_TRUE(GradCheck("cumprod", {z}, {{"dim", int64_t{1}}}));
  EXPECT_TRUE(GradCheck("cumprod", {z}, {{"dim", int64_t{0}}}));
  EXPECT_TRUE(GradCheck("cumprod", {Values(DType::kF64, {}, {0.0})}, {{"dim", int64_t{0}}}));
  // x = [2, 0, 3], seed 1: out = [2, 0, 0]; d/dx0 = 1, d/dx1 = 2 + 2*3, d/dx2 = 0.
  EXPECT_TRUE(AllClose(Grad("cumprod", Values(DType::kF64, {3}, {2, 0, 3}), {{"dim", int64_t{0}}},
                            Values(DType::kF64, {3}, {1, 1, 1})),
                       {1, 8, 0}));
}

TEST(ProductNormScanGrad, BalancedCheckpointing) {
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  Tensor x = Random(DType::kF64, {3, 4}, 10, 0.5, 1.5);
  EXPECT_TRUE(GradCheck("prod", {x}, {{"dim", int64_t{1}}}, balanced));
  EXPECT_TRUE(GradCheck("norm", {x}, {{"p", 3.0}, {"dim", Dims{0}}}, balanced));
  EXPECT_TRUE(GradCheck("cumsum", {x}, {{"dim", int64_t{0}}}, balanced));
  EXPECT_TRUE(GradCheck("cumprod", {x}, {{"dim", int64_t{1}}}, balanced));
}

TEST(ProductNormScanGrad, IntegerInputsAreNotRecorded) {
  AutodiffContext ctx(1, Checkpointing::kNone);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  Tensor x = Random(DType::kF64, {2, 3}, 11);
  x.set_autograd(MakeLeafMeta(1, 100));
  // An integer dtype attribute makes an integer result: a plain tensor.
  for (const std::string op : {"cumsum", "cumprod"}) {
    auto out =
        TestDispatcher().Call(op, {x}, {{"dim", int64_t{1}}, {"dtype", std::string("i64")}}, env);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].autograd(), nullptr) << op;
  }
  auto p = TestDispatcher().Call("prod", {x}, {{"dtype", std::string("f32")}}, env);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NE((*p)[0].autograd(), nullptr);
}

}  // namespace
}  // namespace tensord
