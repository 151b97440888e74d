// Gradients through bf16/f16 storage: casts between float dtypes pass gradients through (cast
// back to each input's dtype), and ops on 2-byte tensors record on the 2-byte tensors, so
// their gradients come back in bf16/f16. Each chain is compared with the same chain in f32 on
// the same (exactly representable) values.
// Tolerances on gradients: bf16 rtol 2e-2, atol 2e-2; f16 rtol 2e-3, atol 2e-3 (a gradient
// passes through several 2-byte roundings: the seed, each intermediate gradient, the result).
#include <gtest/gtest.h>

#include <functional>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

using Chain = std::function<absl::StatusOr<Tensor>(const std::vector<Tensor>&, const CallEnv&)>;

absl::StatusOr<Tensor> Op(const std::string& op, std::vector<Tensor> in, const CallEnv& env,
                          const AttrMap& attrs = {}) {
  ASSIGN_OR_RETURN(std::vector<Tensor> out, TestDispatcher().Call(op, std::move(in), attrs, env));
  return out[0];
}

Tensor Cast(const Tensor& t, DType d) {
  return Run1("to_dtype", {t}, {{"dtype", std::string(DTypeName(d))}});
}

// Gradients of sum(seed * chain(leaves)), one per leaf.
absl::StatusOr<std::vector<Tensor>> Grads(const Chain& chain, const std::vector<Tensor>& leaves,
                                          const Tensor& seed,
                                          Checkpointing mode = Checkpointing::kNone) {
  AutodiffContext ctx(1, mode);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  std::vector<Tensor> args = leaves;
  for (size_t i = 0; i < args.size(); ++i) args[i].set_autograd(MakeLeafMeta(1, 100 + i));
  ASSIGN_OR_RETURN(Tensor out, chain(args, env));
  ASSIGN_OR_RETURN(std::vector<LeafGradient> grads,
                   TestDispatcher().Backward(ctx, {out}, {seed}, false, env));
  std::vector<Tensor> result(leaves.size());
  for (const LeafGradient& g : grads) result[g.leaf->tensor_id - 100] = g.grad;
  return result;
}

TEST(LowPrecisionGrad, ThroughCastChains) {
  // x (f32) -> bf16 -> f32 -> * w: the gradient of x is w rounded to bf16 (the cast's
  // gradient is cast to the cast's input dtype on the way back), as in PyTorch.
  Tensor x = Random(DType::kF32, {7}, 1);
  Tensor w = Random(DType::kF32, {7}, 2);
  for (DType low : {DType::kBF16, DType::kF16}) {
    const std::string name(DTypeName(low));
    Chain chain = [&](const std::vector<Tensor>& in, const CallEnv& env) -> absl::StatusOr<Tensor> {
      ASSIGN_OR_RETURN(Tensor l, Op("to_dtype", {in[0]}, env, {{"dtype", name}}));
      EXPECT_TRUE(l.autograd() != nullptr);
      ASSIGN_OR_RETURN(Tensor f, Op("to_dtype", {l}, env, {{"dtype", "f32"}}));
      return Op("mul", {f, w}, env);
    };
    auto g = Grads(chain, {x}, Run1("ones_like", {x}));
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ((*g)[0].dtype(), DType::kF32);
    EXPECT_TRUE(AllClose((*g)[0], Cast(Cast(w, low), DType::kF32), 0, 0)) << name;
  }
  // f64 -> bf16 -> f16 -> f32: every hop casts the gradient back.
  Tensor x64 = Random(DType::kF64, {5}, 3);
  Chain hops = [](const std::vector<Tensor>& in, const CallEnv& env) -> absl::StatusOr<Tensor> {
    ASSIGN_OR_RETURN(Tensor a, Op("to_dtype", {in[0]}, env, {{"dtype", "bf16"}}));
    ASSIGN_OR_RETURN(Tensor b, Op("to_dtype", {a}, env, {{"dtype", "f16"}}));
    return Op("to_dtype", {b}, env, {{"dtype", "f32"}});
  };
  Tensor seed = Values(DType::kF32, {5}, {1.0, 0.1, -3.0, 1e-3, 300.0});
  auto g = Grads(hops, {x64}, seed);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)[0].dtype(), DType::kF64);
  EXPECT_TRUE(
      AllClose((*g)[0], Cast(Cast(Cast(seed, DType::kF16), DType::kBF16), DType::kF64), 0, 0));
}

class LowPrecisionGrads : public ::testing::TestWithParam<DType> {
 protected:
  double rtol() const { return GetParam() == DType::kBF16 ? 2e-2 : 2e-3; }
  // Leaves rounded to the 2-byte dtype, and the same values in f32.
  std::vector<Tensor> Low(const std::vector<Tensor>& f32) const {
    std::vector<Tensor> out;
    for (const Tensor& t : f32) out.push_back(Cast(t, GetParam()));
    return out;
  }
  static std::vector<Tensor> Widen(const std::vector<Tensor>& low) {
    std::vector<Tensor> out;
    for (const Tensor& t : low) out.push_back(Cast(t, DType::kF32));
    return out;
  }

  // Gradients of `chain` on 2-byte leaves: in the leaves' dtype, close to the f32 gradients
  // on the same values; BALANCED checkpointing (recomputing the memory-bound forwards from
  // 2-byte saved values) gives the same bits.
  void Check(const Chain& chain, const std::vector<Tensor>& f32_leaves, const Shape& out_shape) {
    const DType d = GetParam();
    std::vector<Tensor> low = Low(f32_leaves);
    Tensor seed32 = Cast(Cast(Random(DType::kF32, out_shape, 99), d), DType::kF32);
    auto got = Grads(chain, low, Cast(seed32, d));
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = Grads(chain, Widen(low), seed32);
    ASSERT_TRUE(want.ok()) << want.status();
    auto balanced = Grads(chain, low, Cast(seed32, d), Checkpointing::kBalanced);
    ASSERT_TRUE(balanced.ok()) << balanced.status();
    for (size_t i = 0; i < low.size(); ++i) {
      ASSERT_TRUE((*got)[i].defined()) << "leaf " << i;
      EXPECT_EQ((*got)[i].dtype(), d) << "leaf " << i;
      EXPECT_TRUE(AllClose((*got)[i], (*want)[i], rtol(), rtol())) << "leaf " << i;
      EXPECT_TRUE(AllClose((*balanced)[i], (*got)[i], 0, 0)) << "leaf " << i;
    }
  }
};

TEST_P(LowPrecisionGrads, MatmulReluSum) {
  Chain chain = [](const std::vector<Tensor>& in, const CallEnv& env) -> absl::StatusOr<Tensor> {
    ASSIGN_OR_RETURN(Tensor h, Op("matmul", {in[0], in[1]}, env));
    ASSIGN_OR_RETURN(Tensor r, Op("relu", {h}, env));
    return Op("sum", {r}, env, {{"dim", std::vector<int64_t>{1}}});
  };
  Check(chain, {Random(DType::kF32, {6, 5}, 1), Random(DType::kF32, {5, 4}, 2)}, {6});
}

TEST_P(LowPrecisionGrads, LinearSigmoidMean) {
  Chain chain = [](const std::vector<Tensor>& in, const CallEnv& env) -> absl::StatusOr<Tensor> {
    ASSIGN_OR_RETURN(Tensor h, Op("linear", {in[0], in[1], in[2]}, env));
    ASSIGN_OR_RETURN(Tensor s, Op("sigmoid", {h}, env));
    ASSIGN_OR_RETURN(Tensor e, Op("exp", {s}, env));
    return Op("mean", {e}, env, {{"dim", std::vector<int64_t>{0}}});
  };
  Check(
      chain,
      {Random(DType::kF32, {3, 8}, 1), Random(DType::kF32, {4, 8}, 2), Random(DType::kF32, {4}, 3)},
      {4});
}

TEST_P(LowPrecisionGrads, Conv2dSoftmax) {
  Chain chain = [](const std::vector<Tensor>& in, const CallEnv& env) -> absl::StatusOr<Tensor> {
    ASSIGN_OR_RETURN(Tensor c, Op("conv2d", {in[0], in[1], in[2]}, env, {{"padding", int64_t{1}}}));
    ASSIGN_OR_RETURN(Tensor s, Op("softmax", {c}, env, {{"dim", int64_t{1}}}));
    ASSIGN_OR_RETURN(Tensor m, Op("mul", {s, in[3]}, env));  // broadcast: summed back
    return Op("sum", {m}, env, {{"dim", std::vector<int64_t>{3}}});
  };
  Check(chain,
        {Random(DType::kF32, {2, 3, 5, 4}, 1), Random(DType::kF32, {3, 3, 3, 3}, 2),
         Random(DType::kF32, {3}, 3), Random(DType::kF32, {5, 1}, 4)},
        {2, 3, 5});
}

TEST_P(LowPrecisionGrads, Amax) {
  // Distinct values k/8, exact in both 2-byte dtypes, so no ties split the gradient.
  std::vector<double> v(24);
  for (int k = 0; k < 24; ++k) v[k] = ((k * 7) % 24 - 12) / 8.0;
  Chain chain = [](const std::vector<Tensor>& in, const CallEnv& env) -> absl::StatusOr<Tensor> {
    ASSIGN_OR_RETURN(Tensor y, Op("mul", {in[0], in[1]}, env));
    return Op("amax", {y}, env, {{"dim", std::vector<int64_t>{1}}});
  };
  Check(chain, {Values(DType::kF32, {4, 6}, v), Values(DType::kF32, {1}, {1.5})}, {4});
}

TEST_P(LowPrecisionGrads, MixedWithF32Leaves) {
  // An f32 leaf cast down meets a 2-byte weight: its gradient comes back in f32, the
  // weight's in the 2-byte dtype; an f32 bias promotes the sum to f32.
  const DType d = GetParam();
  const std::string name(DTypeName(d));
  Tensor x = Cast(Cast(Random(DType::kF32, {4, 3}, 1), d), DType::kF32);
  Tensor w = Cast(Random(DType::kF32, {3, 2}, 2), d);
  Tensor b = Random(DType::kF32, {2}, 3);
  Chain chain = [&](const std::vector<Tensor>& in, const CallEnv& env) -> absl::StatusOr<Tensor> {
    ASSIGN_OR_RETURN(Tensor xl, Op("to_dtype", {in[0]}, env, {{"dtype", name}}));
    ASSIGN_OR_RETURN(Tensor h, Op("matmul", {xl, in[1]}, env));
    EXPECT_EQ(h.dtype(), d);
    ASSIGN_OR_RETURN(Tensor y, Op("add", {h, in[2]}, env));
    EXPECT_EQ(y.dtype(), DType::kF32);
    return y;
  };
  Tensor seed = Random(DType::kF32, {4, 2}, 4);
  auto g = Grads(chain, {x, w, b}, seed);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)[0].dtype(), DType::kF32);
  EXPECT_EQ((*g)[1].dtype(), d);
  EXPECT_EQ((*g)[2].dtype(), DType::kF32);
  // dx = round(seed) @ w^T computed in f32 and rounded once; db = sum of seed rows in f32.
  Tensor seed_low = Cast(Cast(seed, d), DType::kF32);
  Tensor dx = Run1("matmul", {seed_low, Run1("transpose", {Cast(w, DType::kF32)},
                                             {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}})});
  EXPECT_TRUE(AllClose((*g)[0], Cast(Cast(dx, d), DType::kF32), 0, 0));
  EXPECT_TRUE(
      AllClose((*g)[2], Run1("sum", {seed}, {{"dim", std::vector<int64_t>{0}}}), 1e-6, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(BF16AndF16, LowPrecisionGrads,
                         ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace tensord
