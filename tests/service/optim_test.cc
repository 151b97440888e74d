// The C++ client's optimizers (client/cpp/optim.h) through a real server: a step updates in
// place by the formulas of torch.optim (checked against the closed form of a first step),
// keeps its state on the server, trains, and refuses bad options itself with the server's
// answer. tests/python/optable_optim.py checks the ops against torch.optim step by step.
#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

class OptimTest : public ServiceTest {
 protected:
  // loss = sum(w * c): its gradient is c whatever w is.
  absl::StatusOr<tc::Gradients> LinearGrad(tc::AutodiffContext& ctx, const tc::Tensor& w,
                                           const std::vector<double>& c) {
    absl::StatusOr<tc::Tensor> loss = tc::Sum(tc::Mul(w, tc::HostTensor(c)));
    if (!loss.ok()) return loss.status();
    return ctx.Backward({*loss});
  }
};

TEST_F(OptimTest, SgdStepIsParamMinusLrTimesGrad) {
  REQUIRE_OPS("sgd", "mul", "sum");
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(
      tc::Tensor w, session().Put(tc::HostTensor(std::vector<double>{1, -2, 3}), {true, ctx.id()}));
  tc::SgdOptions options;
  options.lr = 0.25;
  tc::Sgd opt({w}, options);
  ASSERT_OK_AND_ASSIGN(tc::Gradients g, LinearGrad(ctx, w, {4, 8, -2}));
  ASSERT_OK(opt.Step(g));
  EXPECT_THAT(Doubles(w), ::testing::ElementsAre(0.0, -4.0, 3.5));
  EXPECT_TRUE(opt.state(w).empty()) << "plain SGD keeps no state";
}

TEST_F(OptimTest, AdamFirstStepMovesEachWeightByLrAgainstItsGradient) {
  REQUIRE_OPS("adam", "mul", "sum");
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  const std::vector<double> w0 = {0.5, -1.5, 2.0};
  ASSERT_OK_AND_ASSIGN(tc::Tensor w, session().Put(tc::HostTensor(w0), {true, ctx.id()}));
  tc::AdamOptions options;
  options.lr = 0.1;
  tc::Adam opt({w}, options);
  const std::vector<double> c = {3.0, -0.25, 1e-3};
  ASSERT_OK_AND_ASSIGN(tc::Gradients g, LinearGrad(ctx, w, c));
  ASSERT_OK(opt.Step(g));
  // Step 1 with zero moments: m = (1-b1) g, v = (1-b2) g^2, so the bias-corrected update is
  // lr * g / (|g| + eps).
  const std::vector<double> w1 = Doubles(w);
  ASSERT_EQ(w1.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(w1[i], w0[i] - 0.1 * c[i] / (std::fabs(c[i]) + 1e-8), 1e-12) << i;
  }
  std::vector<tc::Tensor> state = opt.state(w);
  ASSERT_EQ(state.size(), 3u) << "exp_avg, exp_avg_sq, step";
  EXPECT_THAT(Doubles(state[2]), ::testing::ElementsAre(1.0));
  const std::vector<double> m = Doubles(state[0]);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(m[i], 0.1 * c[i], 1e-15) << i;
}

TEST_F(OptimTest, AdamWTrainsALinearRegression) {
  REQUIRE_OPS("adamw", "matmul", "mse_loss");
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  std::vector<float> xs, ys;
  for (int i = 0; i < 32; ++i) {
    const float a = static_cast<float>(i % 8) / 4 - 1, b = static_cast<float>(i / 8) / 2 - 1;
    xs.insert(xs.end(), {a, b});
    ys.push_back(2 * a - 3 * b + 0.5f);
  }
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, session().Put(tc::HostTensor(xs, {32, 2})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, session().Put(tc::HostTensor(ys, {32, 1})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor w, session().Put(tc::HostTensor(std::vector<float>{0, 0}, {2, 1}),
                                                   {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b,
                       session().Put(tc::HostTensor(std::vector<float>{0}), {true, ctx.id()}));
  tc::AdamOptions options = tc::AdamWDefaults();
  options.lr = 0.1;
  options.weight_decay = 0;
  tc::AdamW opt({w, b}, options);
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    ASSERT_OK_AND_ASSIGN(tc::Tensor loss, tc::MseLoss(tc::Matmul(x, w) + b, y));
    ASSERT_OK_AND_ASSIGN(double value, loss.Item());
    if (step == 0) first = value;
    last = value;
    ASSERT_OK_AND_ASSIGN(tc::Gradients g, ctx.Backward({loss}));
    ASSERT_OK(opt.Step(g));
  }
  EXPECT_LT(last, first * 1e-3) << "first loss " << first;
  const std::vector<double> wv = Doubles(w);
  ASSERT_EQ(wv.size(), 2u);
  EXPECT_NEAR(wv[0], 2.0, 0.05);
  EXPECT_NEAR(wv[1], -3.0, 0.05);
  EXPECT_THAT(Doubles(opt.state(b)[2]), ::testing::ElementsAre(300.0));
  // Every update ran under no_grad: the tape holds nothing between steps.
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, session().Info());
  ASSERT_NE(info.context(ctx.id()), nullptr);
  EXPECT_EQ(info.context(ctx.id())->tape_nodes, 0u);
}

TEST_F(OptimTest, BadOptionsAreRefusedByTheClientAsTheServerWould) {
  REQUIRE_OPS("sgd", "adam", "mul", "sum");
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor w,
                       session().Put(tc::HostTensor(std::vector<double>{1, 2}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Gradients g, LinearGrad(ctx, w, {1, 1}));
  tc::SgdOptions sgd;
  sgd.lr = -1;
  tc::Sgd negative({w}, sgd);
  EXPECT_TRUE(FailsWith(negative.Step(g), absl::StatusCode::kInvalidArgument, v1::BAD_ATTRIBUTE,
                        {{"attribute", "lr"}, {"origin", "client"}}));
  sgd.lr = 0.1;
  sgd.nesterov = true;
  tc::Sgd nesterov({w}, sgd);
  EXPECT_TRUE(FailsWith(nesterov.Step(g), absl::StatusCode::kInvalidArgument, v1::BAD_ATTRIBUTE,
                        {{"attribute", "nesterov"}}));
  tc::AdamOptions adam;
  adam.beta2 = 1.0;
  tc::Adam beta({w}, adam);
  EXPECT_TRUE(FailsWith(beta.Step(g), absl::StatusCode::kInvalidArgument, v1::BAD_ATTRIBUTE,
                        {{"attribute", "betas"}, {"op", "adam"}}));
  EXPECT_THAT(Doubles(w), ::testing::ElementsAre(1.0, 2.0));
  // The server answers the same for a call that bypasses the client's check.
  tc::NoGradGuard no_grad = session().NoGrad();
  EXPECT_TRUE(FailsWith(Status(session().Op("sgd", {w, w}, {{"lr", -1.0}})),
                        absl::StatusCode::kInvalidArgument, v1::BAD_ATTRIBUTE,
                        {{"attribute", "lr"}, {"op", "sgd"}}));
}

}  // namespace
}  // namespace tensord::service_test
