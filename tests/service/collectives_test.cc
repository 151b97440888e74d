// Process groups through the C++ client: two sessions of one server form a group of two
// (a server holds sessions of many groups), all_reduce sums across them, the session info
// shows the group, and an autodiff tensor of a closed context on one rank fails the
// collective on both with AUTODIFF_CONTEXT_NOT_ENABLED naming that rank, after which the
// group still works; and a backward reduces its gradients across the group while it runs.
// Groups across processes: tests/python/test_collectives.py, test_gradient_reduction.py.
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/core/status.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

class CollectivesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options = TestServerOptions();
    options.collective_address = "127.0.0.1";
    options.collective_timeout_ms = 5000;
    env_ = StartServer(options).release();
  }
  static void TearDownTestSuite() {
    delete env_;
    env_ = nullptr;
  }
  void SetUp() override {
    char dir[] = "/tmp/tensord-collectives-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    rendezvous_ = absl::StrCat("file://", dir);
    for (int r = 0; r < 2; ++r) {
      absl::StatusOr<tc::Session> s = env_->client->CreateSession();
      ASSERT_TRUE(s.ok()) << s.status();
      sessions_.push_back(std::move(*s));
    }
    static int groups = 0;
    const std::string name = absl::StrCat("cpp-", getpid(), "-", ++groups);
    auto joined = Both([&](int r) { return sessions_[r].JoinGroup(name, r, 2, rendezvous_); });
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(joined[r].ok()) << joined[r].status();
      EXPECT_EQ(joined[r]->rank, r);
      EXPECT_EQ(joined[r]->world_size, 2);
      EXPECT_EQ(joined[r]->backend, "gloo");
    }
  }

  // Runs fn(rank) for both ranks at once.
  template <typename Fn>
  auto Both(Fn fn) -> std::vector<decltype(fn(0))> {
    auto other = std::async(std::launch::async, fn, 1);
    std::vector<decltype(fn(0))> out;
    out.push_back(fn(0));
    out.push_back(other.get());
    return out;
  }

  static ServerAndClient* env_;
  std::string rendezvous_;
  std::vector<tc::Session> sessions_;
};
ServerAndClient* CollectivesTest::env_ = nullptr;

TEST_F(CollectivesTest, AllReduceSumsAcrossTheGroup) {
  auto sums = Both([&](int r) -> absl::StatusOr<tc::HostTensor> {
    tc::Session& s = sessions_[r];
    ASSIGN_OR_RETURN(tc::Tensor x, s.Put(tc::HostTensor(std::vector<double>{1.0 + r, 10.0})));
    ASSIGN_OR_RETURN(tc::Tensor y, s.Op1("all_reduce", {x}, {{"op", std::string("sum")}}));
    return s.Get(y);
  });
  for (const auto& sum : sums) {
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ(*sum->ToVector<double>(), (std::vector<double>{3.0, 20.0}));
  }
  absl::StatusOr<tc::SessionInfo> info = sessions_[1].Info();
  ASSERT_TRUE(info.ok());
  ASSERT_TRUE(info->group.has_value());
  EXPECT_EQ(info->group->rank, 1);
  ASSERT_TRUE(sessions_[1].LeaveGroup().ok());
  info = sessions_[1].Info();
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->group.has_value());
  EXPECT_EQ(tc::ReasonOf(sessions_[1].LeaveGroup()), v1::GROUP_NOT_JOINED);
}

TEST_F(CollectivesTest, AClosedContextOnOneRankFailsEveryRank) {
  auto results = Both([&](int r) -> absl::Status {
    tc::Session& s = sessions_[r];
    ASSIGN_OR_RETURN(tc::AutodiffContext ctx, s.OpenAutodiff());
    ASSIGN_OR_RETURN(tc::Tensor x, s.Put(tc::HostTensor(std::vector<double>{1.0, 2.0}),
                                         tc::PutOptions{true, ctx.id()}));
    if (r == 1) RETURN_IF_ERROR(ctx.Close());
    return s.Op1("all_reduce", {x}).status();
  });
  for (const absl::Status& s : results) {
    EXPECT_EQ(tc::ReasonOf(s), v1::AUTODIFF_CONTEXT_NOT_ENABLED) << s;
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(tc::MetadataOf(s)["rank"], "1") << s;
    EXPECT_EQ(tc::MetadataOf(s)["op"], "all_reduce");
  }
  auto again = Both([&](int r) -> absl::StatusOr<tc::HostTensor> {
    tc::Session& s = sessions_[r];
    ASSIGN_OR_RETURN(tc::Tensor x, s.Put(tc::HostTensor(std::vector<double>{1.0})));
    ASSIGN_OR_RETURN(tc::Tensor y, s.Op1("all_reduce", {x}));
    return s.Get(y);
  });
  for (const auto& v : again) {
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v->ToVector<double>(), (std::vector<double>{2.0}));
  }
}

// A data-parallel backward: each rank's loss is sum(w * x_r) + sum(b * b); the gradients
// come back as the mean over both ranks, computed while the backward runs. When rank 0's
// context is closed, both backwards fail with its AUTODIFF_CONTEXT_NOT_ENABLED, in the
// reduction, and the group goes on.
TEST_F(CollectivesTest, ABackwardReducesItsGradientsAcrossTheGroup) {
  auto step = [&](int r, bool close) -> absl::StatusOr<std::vector<std::vector<double>>> {
    tc::Session& s = sessions_[r];
    ASSIGN_OR_RETURN(tc::AutodiffContext ctx, s.OpenAutodiff());
    ASSIGN_OR_RETURN(tc::Tensor w, s.Put(tc::HostTensor(std::vector<double>{1.0, 2.0, 3.0}),
                                         tc::PutOptions{true, ctx.id()}));
    ASSIGN_OR_RETURN(tc::Tensor b, s.Put(tc::HostTensor(std::vector<double>{0.5 + r}),
                                         tc::PutOptions{true, ctx.id()}));
    ASSIGN_OR_RETURN(tc::Tensor x,
                     s.Put(tc::HostTensor(std::vector<double>{1.0 + r, 2.0, -1.0 * r})));
    ASSIGN_OR_RETURN(tc::Tensor wx, s.Op1("mul", {w, x}));
    ASSIGN_OR_RETURN(tc::Tensor bb, s.Op1("mul", {b, b}));
    ASSIGN_OR_RETURN(tc::Tensor l1, s.Op1("sum", {wx}));
    ASSIGN_OR_RETURN(tc::Tensor l2, s.Op1("sum", {bb}));
    ASSIGN_OR_RETURN(tc::Tensor loss, s.Op1("add", {l1, l2}));
    if (close) RETURN_IF_ERROR(ctx.Close());
    ASSIGN_OR_RETURN(tc::Gradients g, ctx.Backward({loss}, tc::GradientReduction{{{b}, {w}}}));
    std::vector<std::vector<double>> out;
    for (const tc::Tensor& leaf : {w, b}) {
      ASSIGN_OR_RETURN(tc::HostTensor v, s.Get(g.grad(leaf)));
      out.push_back(*v.ToVector<double>());
    }
    return out;
  };
  auto reduced = Both([&](int r) { return step(r, false); });
  for (const auto& grads : reduced) {
    ASSERT_TRUE(grads.ok()) << grads.status();
    // d/dw: the mean of x_0 = {1, 2, 0} and x_1 = {2, 2, -1}; d/db: the mean of 2 b_r.
    EXPECT_EQ((*grads)[0], (std::vector<double>{1.5, 2.0, -0.5}));
    EXPECT_EQ((*grads)[1], (std::vector<double>{2.0}));
  }
  auto failed = Both([&](int r) { return step(r, r == 0); });
  for (const auto& grads : failed) {
    EXPECT_EQ(tc::ReasonOf(grads.status()), v1::AUTODIFF_CONTEXT_NOT_ENABLED) << grads.status();
  }
  EXPECT_EQ(tc::MetadataOf(failed[1].status())["rank"], "0") << failed[1].status();
  EXPECT_EQ(tc::MetadataOf(failed[1].status())["phase"], "gradient_reduction");
  auto again = Both([&](int r) { return step(r, false); });
  for (const auto& grads : again) EXPECT_TRUE(grads.ok()) << grads.status();
}

// The same reduction inside a compiled program (ProgramBuilder::Reduce): the fetched
// gradients are the group's mean, at every run.
TEST_F(CollectivesTest, AProgramsBackwardReducesItsGradientsAcrossTheGroup) {
  auto step = [&](int r) -> absl::StatusOr<std::vector<std::vector<double>>> {
    tc::Session& s = sessions_[r];
    ASSIGN_OR_RETURN(tc::AutodiffContext ctx, s.OpenAutodiff());
    ASSIGN_OR_RETURN(tc::Tensor w, s.Put(tc::HostTensor(std::vector<double>{1.0, 2.0}),
                                         tc::PutOptions{true, ctx.id()}));
    tc::ProgramBuilder b = s.NewProgram(ctx.id());
    tc::Operand x = b.Parameter(tc::HostTensor(std::vector<double>{0.0, 0.0}), "x");
    tc::CallRef wx = b.Add("mul", {w, x});
    tc::CallRef loss = b.Add("sum", {wx.out(0)});
    b.Backward({loss.out(0)}, {w}, /*fetch_gradients=*/true);
    b.Reduce(tc::GradientReduction{{{w}}, "mean"});
    ASSIGN_OR_RETURN(tc::Program p, b.Compile());
    std::vector<std::vector<double>> out;
    for (double scale : {1.0, 3.0}) {
      const std::vector<double> xs = {scale * (1.0 + r), -scale * r};
      ASSIGN_OR_RETURN(tc::ProgramResult res, p.Run({tc::HostTensor(xs)}));
      out.push_back(*res.gradients().at(0).ToVector<double>());
    }
    return out;
  };
  auto grads = Both(step);
  for (const auto& g : grads) {
    ASSERT_TRUE(g.ok()) << g.status();
    // The mean of x over the ranks: ({1, 0} + {2, -1}) / 2, then three times that.
    EXPECT_EQ((*g)[0], (std::vector<double>{1.5, -0.5}));
    EXPECT_EQ((*g)[1], (std::vector<double>{4.5, -1.5}));
  }
}

}  // namespace
}  // namespace tensord::service_test
