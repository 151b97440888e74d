// Finite-difference gradient checks (f64) of the linear-algebra and neural-network ops, plus
// chains under BALANCED checkpointing, where memory-bound ops are recomputed during backward.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

constexpr DType kF64 = DType::kF64;
using Ints = std::vector<int64_t>;

GradCheckOptions Balanced() {
  GradCheckOptions o;
  o.checkpointing = Checkpointing::kBalanced;
  return o;
}

TEST(LinalgGrad, Matmul) {
  const std::vector<std::pair<Shape, Shape>> cases = {{{3}, {3}},
                                                      {{3}, {3, 4}},
                                                      {{2, 3}, {3}},
                                                      {{2, 3}, {3, 4}},
                                                      {{2, 2, 3}, {3, 4}},
                                                      {{2, 3}, {2, 3, 4}},
                                                      {{2, 1, 2, 3}, {3, 3, 2}},
                                                      {{3}, {2, 3, 2}},
                                                      {{2, 2, 3}, {3}}};
  uint32_t seed = 1;
  for (const auto& [sa, sb] : cases) {
    Tensor a = Random(kF64, sa, seed++), b = Random(kF64, sb, seed++);
    EXPECT_TRUE(GradCheck("matmul", {a, b})) << ShapeToString(sa) << " @ " << ShapeToString(sb);
  }
}

TEST(LinalgGrad, MmBmmLinear) {
  EXPECT_TRUE(GradCheck("mm", {Random(kF64, {3, 4}, 1), Random(kF64, {4, 2}, 2)}));
  EXPECT_TRUE(GradCheck("bmm", {Random(kF64, {2, 3, 4}, 3), Random(kF64, {2, 4, 2}, 4)}));
  Tensor w = Random(kF64, {3, 4}, 5), b = Random(kF64, {3}, 6);
  EXPECT_TRUE(GradCheck("linear", {Random(kF64, {2, 4}, 7), w, b}));
  EXPECT_TRUE(GradCheck("linear", {Random(kF64, {2, 2, 4}, 8), w, b}));
  EXPECT_TRUE(GradCheck("linear", {Random(kF64, {4}, 9), w}));
  EXPECT_TRUE(GradCheck("linear", {Random(kF64, {2, 4}, 10), Random(kF64, {4}, 11)}));
  EXPECT_TRUE(GradCheck("linear", {Random(kF64, {2, 4}, 12), w, Random(kF64, {1}, 13)}));
}

TEST(NnGrad, Conv2d) {
  struct Case {
    Shape x, w;
    AttrMap attrs;
    bool bias;
  };
  const std::vector<Case> cases = {
      {{2, 2, 5, 4}, {3, 2, 3, 2}, {}, true},
      {{1, 2, 6, 5}, {2, 2, 2, 3}, {{"stride", Ints{2, 1}}, {"padding", Ints{1, 2}}}, false},
      {{1, 1, 7, 7}, {2, 1, 3, 2}, {{"dilation", Ints{2, 3}}, {"padding", Ints{2}}}, true},
      {{2, 4, 4, 4}, {4, 2, 2, 2}, {{"groups", int64_t{2}}, {"stride", Ints{2}}}, true},
      {{2, 5, 5}, {3, 2, 3, 3}, {{"padding", Ints{1}}}, true}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    std::vector<Tensor> in = {Random(kF64, c.x, seed++), Random(kF64, c.w, seed++)};
    if (c.bias) in.push_back(Random(kF64, {c.w[0]}, seed++));
    EXPECT_TRUE(GradCheck("conv2d", in, c.attrs)) << ShapeToString(c.x);
  }
}

TEST(NnGrad, Pooling) {
  const std::vector<AttrMap> max_cases = {
      {{"kernel_size", Ints{2}}},
      {{"kernel_size", Ints{3, 2}}, {"stride", Ints{2, 1}}, {"padding", Ints{1}}},
      {{"kernel_size", Ints{3}}, {"stride", Ints{2}}, {"padding", Ints{1}}, {"ceil_mode", true}},
      {{"kernel_size", Ints{2}}, {"dilation", Ints{2}}, {"ceil_mode", true}}};
  uint32_t seed = 10;
  for (const AttrMap& a : max_cases) {
    // Distinct values: finite differences are only meaningful away from ties.
    EXPECT_TRUE(GradCheck("max_pool2d", {Random(kF64, {2, 2, 7, 6}, seed++)}, a));
  }
  EXPECT_TRUE(GradCheck("max_pool2d", {Random(kF64, {2, 5, 5}, seed++)},
                        {{"kernel_size", Ints{2}}, {"stride", Ints{1}}}));
  for (bool include_pad : {true, false}) {
    for (bool ceil_mode : {false, true}) {
      AttrMap a = {{"kernel_size", Ints{3}},
                   {"stride", Ints{2}},
                   {"padding", Ints{1}},
                   {"ceil_mode", ceil_mode},
                   {"count_include_pad", include_pad}};
      EXPECT_TRUE(GradCheck("avg_pool2d", {Random(kF64, {1, 2, 6, 7}, seed++)}, a));
    }
  }
  EXPECT_TRUE(GradCheck("avg_pool2d", {Random(kF64, {1, 2, 4, 4}, seed++)},
                        {{"kernel_size", Ints{2}}, {"divisor_override", int64_t{3}}}));
}

TEST(NnGrad, LayerNorm) {
  Tensor x = Random(kF64, {3, 2, 4}, 1, -2, 2);
  for (const Shape& norm : {Shape{4}, Shape{2, 4}}) {
    AttrMap a = {{"normalized_shape", norm}};
    EXPECT_TRUE(GradCheck("layer_norm", {x}, a));
    EXPECT_TRUE(GradCheck("layer_norm", {x, Random(kF64, norm, 2)}, a));
    EXPECT_TRUE(GradCheck("layer_norm", {x, Random(kF64, norm, 3), Random(kF64, norm, 4)}, a));
  }
}

TEST(NnGrad, Embedding) {
  Tensor idx = Values(DType::kI64, {2, 3}, {0, 3, 1, 3, 4, 0});
  Tensor w = Random(kF64, {5, 2}, 1);
  GradCheckOptions o;
  o.wrt = {1};
  EXPECT_TRUE(GradCheck("embedding", {idx, w}, {}, o));
  // With padding_idx the padding row gets no gradient even though it is looked up, so finite
  // differences do not apply: check the rows directly.
  AutodiffContext ctx(1, Checkpointing::kNone);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  Tensor lw = w;
  lw.set_autograd(MakeLeafMeta(1, 7));
  auto y = TestDispatcher().Call("embedding", {idx, lw}, {{"padding_idx", int64_t{3}}}, env);
  ASSERT_TRUE(y.ok()) << y.status();
  auto grads =
      TestDispatcher().Backward(ctx, {(*y)[0]}, {Random(kF64, {2, 3, 2}, 5, 1, 2)}, false, env);
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(grads->size(), 1u);
  const Tensor& gw = (*grads)[0].grad;
  EXPECT_EQ(gw.shape(), (Shape{5, 2}));
  EXPECT_EQ(gw.ElementAsDouble(6), 0.0);
  EXPECT_EQ(gw.ElementAsDouble(7), 0.0);
  EXPECT_NE(gw.ElementAsDouble(0), 0.0);  // row 0 is used twice
  EXPECT_EQ(gw.ElementAsDouble(4), 0.0);  // row 2 is never used
}

TEST(NnGrad, DropoutWithSeed) {
  Tensor x = Random(kF64, {4, 5}, 1);
  EXPECT_TRUE(GradCheck("dropout", {x}, {{"p", 0.3}, {"seed", int64_t{11}}}));
  EXPECT_TRUE(GradCheck("dropout", {x}, {{"p", 0.3}, {"seed", int64_t{11}}}, Balanced()));
  EXPECT_TRUE(GradCheck("dropout", {x}, {{"p", 0.5}, {"training", false}}));
}

// ---- chains under checkpointing ---------------------------------------------------------------

using Chain = std::function<absl::StatusOr<Tensor>(const std::vector<Tensor>&, const CallEnv&)>;

absl::StatusOr<Tensor> Call1(const std::string& op, std::vector<Tensor> in, const AttrMap& a,
                             const CallEnv& env) {
  ASSIGN_OR_RETURN(std::vector<Tensor> out, TestDispatcher().Call(op, std::move(in), a, env));
  return out[0];
}

struct ChainResult {
  std::vector<Tensor> grads;  // one per leaf
  Tensor output;
  int64_t saved_bytes = 0;  // what the tape keeps after the forward
};

// Gradients of sum(seed * chain(leaves)) under `mode`.
absl::StatusOr<ChainResult> ChainGrads(const Chain& chain, const std::vector<Tensor>& leaves,
                                       const Tensor& seed, Checkpointing mode) {
  AutodiffContext ctx(1, mode);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  std::vector<Tensor> args = leaves;
  for (size_t i = 0; i < args.size(); ++i) args[i].set_autograd(MakeLeafMeta(1, 100 + i));
  ChainResult r;
  ASSIGN_OR_RETURN(r.output, chain(args, env));
  r.saved_bytes = ctx.SavedBytes();
  ASSIGN_OR_RETURN(std::vector<LeafGradient> grads,
                   TestDispatcher().Backward(ctx, {r.output}, {seed}, false, env));
  r.grads.resize(leaves.size());
  for (const LeafGradient& g : grads) r.grads[g.leaf->tensor_id - 100] = g.grad;
  return r;
}

Tensor CopyOf(const Tensor& t) { return Values(t.dtype(), t.shape(), t.ToDoubles()); }

// Central differences of sum(seed * chain(leaves)) against `grads`.
::testing::AssertionResult MatchesNumeric(const Chain& chain, const std::vector<Tensor>& leaves,
                                          const Tensor& seed, const std::vector<Tensor>& grads) {
  CallEnv plain;
  auto loss = [&](const std::vector<Tensor>& in) {
    auto out = chain(in, plain);
    double total = 0;
    for (int64_t i = 0; out.ok() && i < out->numel(); ++i) {
      total += out->ElementAsDouble(i) * seed.ElementAsDouble(i);
    }
    return total;
  };
  const double eps = 1e-6;
  for (size_t l = 0; l < leaves.size(); ++l) {
    for (int64_t e = 0; e < leaves[l].numel(); ++e) {
      std::vector<Tensor> probe = leaves;
      probe[l] = CopyOf(leaves[l]);
      probe[l].data<double>()[e] += eps;
      const double plus = loss(probe);
      probe[l].data<double>()[e] -= 2 * eps;
      const double minus = loss(probe);
      const double numeric = (plus - minus) / (2 * eps);
      const double got = grads[l].defined() ? grads[l].ElementAsDouble(e) : 0.0;
      if (!(std::fabs(got - numeric) <= 1e-6 + 1e-4 * std::fabs(numeric))) {
        return ::testing::AssertionFailure()
               << "leaf " << l << "[" << e << "]: autodiff " << got << " vs numeric " << numeric;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

void CheckChain(const Chain& chain, const std::vector<Tensor>& leaves, bool expect_savings) {
  auto out = chain(leaves, CallEnv());
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor seed = Random(kF64, out->shape(), 99);
  auto none = ChainGrads(chain, leaves, seed, Checkpointing::kNone);
  auto balanced = ChainGrads(chain, leaves, seed, Checkpointing::kBalanced);
  ASSERT_TRUE(none.ok()) << none.status();
  ASSERT_TRUE(balanced.ok()) << balanced.status();
  for (size_t i = 0; i < leaves.size(); ++i) {
    EXPECT_TRUE(AllClose(balanced->grads[i], none->grads[i], 1e-12, 1e-12)) << "leaf " << i;
  }
  EXPECT_TRUE(MatchesNumeric(chain, leaves, seed, balanced->grads));
  if (expect_savings) EXPECT_LT(balanced->saved_bytes, none->saved_bytes);
}

TEST(CheckpointedGrad, MatmulChain) {
  // linear -> layer_norm -> dropout -> matmul: BALANCED keeps the matmul inputs and recomputes
  // layer_norm and dropout (with its recorded seed) during backward.
  Chain chain = [](const std::vector<Tensor>& l, const CallEnv& env) -> absl::StatusOr<Tensor> {
    ASSIGN_OR_RETURN(Tensor h, Call1("linear", {l[0], l[1], l[2]}, {}, env));
    ASSIGN_OR_RETURN(h, Call1("layer_norm", {h}, {{"normalized_shape", Ints{5}}}, env));
    ASSIGN_OR_RETURN(h, Call1("dropout", {h}, {{"p", 0.25}, {"seed", int64_t{3}}}, env));
    ASSIGN_OR_RETURN(h, Call1("layer_norm", {h}, {{"normalized_shape", Ints{5}}}, env));
    return Call1("matmul", {h, l[3]}, {}, env);
  };
  CheckChain(chain,
             {Random(kF64, {2, 3, 4}, 1), Random(kF64, {5, 4}, 2), Random(kF64, {5}, 3),
              Random(kF64, {5, 2}, 4)},
             true);
}

TEST(CheckpointedGrad, ConvChain) {
  Chain chain = [](const std::vector<Tensor>& l, const CallEnv& env) -> absl::StatusOr<Tensor> {
    ASSIGN_OR_RETURN(Tensor h, Call1("conv2d", {l[0], l[1], l[2]}, {{"padding", Ints{1}}}, env));
    ASSIGN_OR_RETURN(
        h, Call1("max_pool2d", {h}, {{"kernel_size", Ints{2}}, {"stride", Ints{1}}}, env));
    ASSIGN_OR_RETURN(h, Call1("layer_norm", {h}, {{"normalized_shape", Ints{3, 5, 5}}}, env));
    ASSIGN_OR_RETURN(h, Call1("avg_pool2d", {h}, {{"kernel_size", Ints{2}}}, env));
    ASSIGN_OR_RETURN(h, Call1("dropout", {h}, {{"p", 0.2}, {"seed", int64_t{8}}}, env));
    return Call1("conv2d", {h, l[3]}, {}, env);
  };
  CheckChain(chain,
             {Random(kF64, {2, 2, 6, 6}, 5), Random(kF64, {3, 2, 3, 3}, 6), Random(kF64, {3}, 7),
              Random(kF64, {2, 3, 2, 2}, 8)},
             true);
}

TEST(CheckpointedGrad, UnseededDropoutRecomputesItsMask) {
  // x -> dropout (no seed) -> layer_norm. BALANCED recomputes the dropout output for
  // layer_norm's backward; the gradient must use the mask the forward drew, which the output
  // reveals: mask * scale = d / x.
  Tensor x = Random(kF64, {6, 8}, 1, 0.5, 1.5);
  AutodiffContext ctx(1, Checkpointing::kBalanced);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  Tensor lx = x;
  lx.set_autograd(MakeLeafMeta(1, 100));
  auto d = Call1("dropout", {lx}, {{"p", 0.5}}, env);
  ASSERT_TRUE(d.ok()) << d.status();
  auto y = Call1("layer_norm", {*d}, {{"normalized_shape", Ints{8}}}, env);
  ASSERT_TRUE(y.ok()) << y.status();
  Tensor seed = Random(kF64, {6, 8}, 2);
  auto grads = TestDispatcher().Backward(ctx, {*y}, {seed}, false, env);
  ASSERT_TRUE(grads.ok()) << grads.status();

  std::vector<double> mask(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) mask[i] = d->ElementAsDouble(i) / x.ElementAsDouble(i);
  Tensor m = Values(kF64, {6, 8}, mask);
  Chain fixed = [&](const std::vector<Tensor>& l, const CallEnv& e) -> absl::StatusOr<Tensor> {
    ASSIGN_OR_RETURN(Tensor h, Call1("mul", {l[0], m}, {}, e));
    return Call1("layer_norm", {h}, {{"normalized_shape", Ints{8}}}, e);
  };
  EXPECT_TRUE(MatchesNumeric(fixed, {x}, seed, {(*grads)[0].grad}));
}

}  // namespace
}  // namespace tensord
