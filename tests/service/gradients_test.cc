// Gradients through the service: BALANCED and NONE checkpointing agree on an MLP-like graph
// (BALANCED keeping fewer saved bytes), and a small graph matches finite differences.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

std::vector<double> RandomValues(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(n);
  for (double& x : v) x = normal(rng);
  return v;
}

std::vector<float> ToFloats(const std::vector<double>& v) { return {v.begin(), v.end()}; }

class GradientsTest : public ServiceTest {};

struct MlpRun {
  std::vector<std::vector<double>> grads;  // per parameter
  double loss = 0;
  tc::ContextInfo before_backward;
};

// x[16,8] -> linear 8x32 -> gelu -> linear 32x32 -> tanh -> * sigmoid gate -> linear 32x4 ->
// cross_entropy: matmuls (kept by BALANCED) between chains of memory-bound ops (recomputed).
MlpRun RunMlp(tc::Session& session, tc::Checkpointing checkpointing) {
  MlpRun out;
  absl::StatusOr<tc::AutodiffContext> ctx = session.OpenAutodiff(checkpointing);
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  if (!ctx.ok()) return out;
  const std::vector<std::pair<tc::Shape, uint32_t>> specs = {
      {{8, 32}, 1}, {{32}, 2}, {{32, 32}, 3}, {{32}, 4}, {{32, 4}, 5}, {{4}, 6}};
  std::vector<tc::Tensor> params;
  for (const auto& [shape, seed] : specs) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    absl::StatusOr<tc::Tensor> p =
        session.Put(tc::HostTensor(ToFloats(RandomValues(n, seed, 0.3)), shape), {true, ctx->id()});
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return out;
    params.push_back(*p);
  }
  absl::StatusOr<tc::Tensor> x =
      session.Put(tc::HostTensor(ToFloats(RandomValues(16 * 8, 7)), {16, 8}));
  absl::StatusOr<tc::Tensor> y = session.Put(
      tc::HostTensor(std::vector<int64_t>{0, 1, 2, 3, 3, 2, 1, 0, 0, 0, 1, 1, 2, 2, 3, 3}));
  tc::TensorOr h1 = tc::Gelu(tc::Matmul(*x, params[0]) + params[1]);
  tc::TensorOr h2 = tc::Tanh(tc::Matmul(h1, params[2]) + params[3]);
  tc::TensorOr gated = h2 * tc::Sigmoid(h2 * 2.0);
  tc::TensorOr logits = tc::Matmul(gated, params[4]) + params[5];
  tc::TensorOr loss = tc::CrossEntropy(logits, *y);
  EXPECT_TRUE(loss.ok()) << loss.status();
  if (!loss.ok()) return out;
  absl::StatusOr<tc::SessionInfo> info = session.Info();
  EXPECT_TRUE(info.ok()) << info.status();
  if (info.ok() && info->context(ctx->id())) out.before_backward = *info->context(ctx->id());
  out.loss = *loss->Item();
  absl::StatusOr<tc::Gradients> grads = ctx->Backward({*loss});
  EXPECT_TRUE(grads.ok()) << grads.status();
  if (!grads.ok()) return out;
  EXPECT_EQ(grads->size(), params.size());
  for (const tc::Tensor& p : params) out.grads.push_back(Doubles(grads->grad(p)));
  return out;
}

TEST_F(GradientsTest, BalancedMatchesNoneWithFewerSavedBytes) {
  REQUIRE_OPS("matmul", "gelu", "tanh", "sigmoid", "cross_entropy");
  MlpRun none = RunMlp(session(), tc::Checkpointing::kNone);
  MlpRun balanced = RunMlp(session(), tc::Checkpointing::kBalanced);
  ASSERT_EQ(none.grads.size(), 6u);
  ASSERT_EQ(balanced.grads.size(), 6u);
  EXPECT_EQ(none.before_backward.checkpointing, "none");
  EXPECT_EQ(balanced.before_backward.checkpointing, "balanced");
  EXPECT_EQ(none.loss, balanced.loss);
  for (size_t p = 0; p < none.grads.size(); ++p) {
    ASSERT_EQ(none.grads[p].size(), balanced.grads[p].size());
    double norm = 0;
    for (size_t i = 0; i < none.grads[p].size(); ++i) {
      EXPECT_NEAR(none.grads[p][i], balanced.grads[p][i], 1e-6)
          << "param " << p << " [" << i << "]";
      norm += std::abs(none.grads[p][i]);
    }
    EXPECT_GT(norm, 0.0) << "param " << p << " received a gradient";
  }
  EXPECT_GT(none.before_backward.tape_nodes, 0u);
  EXPECT_EQ(none.before_backward.tape_nodes, balanced.before_backward.tape_nodes);
  EXPECT_GT(none.before_backward.saved_bytes, 0u);
  EXPECT_LT(balanced.before_backward.saved_bytes, none.before_backward.saved_bytes)
      << "BALANCED keeps only what compute-bound ops need";
}

// f(a, b, c) = sum(log_softmax(tanh(a @ b + c), dim=1) * w) + sum(a * a) in f64: a is used twice.
absl::StatusOr<double> F(tc::Session& s, const tc::HostTensor& a, const tc::HostTensor& b,
                         const tc::HostTensor& c, const tc::HostTensor& w) {
  tc::Batch batch = s.NewBatch({/*no_grad=*/true});
  tc::CallRef z = batch.Add("add", {batch.Add("matmul", {a, b}), c});
  tc::CallRef ls = batch.Add("log_softmax", {batch.Add("tanh", {z})}, {{"dim", 1}});
  tc::CallRef left = batch.Add("sum", {batch.Add("mul", {ls, w})});
  tc::CallRef right = batch.Add("sum", {batch.Add("mul", {a, a})});
  tc::CallRef total = batch.Add("add", {left, right}, {}, {false, /*fetch=*/true});
  absl::StatusOr<tc::BatchResult> r = batch.Run();
  if (!r.ok()) return r.status();
  return r->value(total).ToDoubles().at(0);
}

TEST_F(GradientsTest, MatchesFiniteDifferences) {
  REQUIRE_OPS("matmul", "tanh", "log_softmax");
  tc::HostTensor a(RandomValues(3 * 4, 11), {3, 4});
  tc::HostTensor b(RandomValues(4 * 5, 12), {4, 5});
  tc::HostTensor c(RandomValues(5, 13), {5});
  tc::HostTensor w(RandomValues(3 * 5, 14), {3, 5});

  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  std::vector<tc::Tensor> leaves;
  for (const tc::HostTensor* v : {&a, &b, &c}) {
    ASSERT_OK_AND_ASSIGN(tc::Tensor t, session().Put(*v, {true, ctx.id()}));
    leaves.push_back(t);
  }
  ASSERT_OK_AND_ASSIGN(tc::Tensor wt, session().Put(w));
  tc::TensorOr z = tc::Matmul(leaves[0], leaves[1]) + leaves[2];
  tc::TensorOr f = tc::Sum(tc::LogSoftmax(tc::Tanh(z), 1) * wt) + tc::Sum(leaves[0] * leaves[0]);
  ASSERT_OK(f);
  ASSERT_OK_AND_ASSIGN(double f0, F(session(), a, b, c, w));
  EXPECT_NEAR(*f->Item(), f0, 1e-12) << "eager and batched forward agree";
  ASSERT_OK_AND_ASSIGN(tc::Gradients grads, ctx.Backward({*f}));

  constexpr double kEps = 1e-6;
  std::vector<tc::HostTensor> inputs = {a, b, c};
  for (size_t k = 0; k < inputs.size(); ++k) {
    std::vector<double> analytic = Doubles(grads.grad(leaves[k]));
    ASSERT_EQ(static_cast<int64_t>(analytic.size()), inputs[k].numel());
    for (int64_t i = 0; i < inputs[k].numel(); ++i) {
      std::vector<tc::HostTensor> plus = inputs, minus = inputs;
      plus[k].mutable_data<double>()[i] += kEps;
      minus[k].mutable_data<double>()[i] -= kEps;
      ASSERT_OK_AND_ASSIGN(double fp, F(session(), plus[0], plus[1], plus[2], w));
      ASSERT_OK_AND_ASSIGN(double fm, F(session(), minus[0], minus[1], minus[2], w));
      const double numeric = (fp - fm) / (2 * kEps);
      EXPECT_NEAR(analytic[i], numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
          << "input " << k << " element " << i;
    }
  }
}

TEST_F(GradientsTest, MultipleRootsSumAndZeroGradOps) {
  REQUIRE_OPS("floor", "exp");
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(
      tc::Tensor x, session().Put(tc::HostTensor(std::vector<double>{0.5, 2.0}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor u,
                       session().Put(tc::HostTensor(std::vector<double>{1.5}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor r1, tc::Sum(tc::Exp(x)));
  ASSERT_OK_AND_ASSIGN(tc::Tensor r2, tc::Sum(x * 3.0));
  // u reaches a root only through floor, whose gradient is zero.
  ASSERT_OK_AND_ASSIGN(tc::Tensor r3, tc::Sum(tc::Op1("floor", {u})));
  ASSERT_OK_AND_ASSIGN(tc::Gradients g, ctx.Backward({r1, r2, r3}));
  std::vector<double> gx = Doubles(g.grad(x));
  ASSERT_EQ(gx.size(), 2u);
  EXPECT_NEAR(gx[0], std::exp(0.5) + 3.0, 1e-12);
  EXPECT_NEAR(gx[1], std::exp(2.0) + 3.0, 1e-12);
  ASSERT_TRUE(g.contains(u)) << "a leaf reached through zero-gradient ops gets zeros";
  EXPECT_THAT(Doubles(g.grad(u)), ::testing::ElementsAre(0.0));
}

}  // namespace
}  // namespace tensord::service_test
