// The two failures tensord exists to carry back (DESIGN.md §1), through every public path of
// the client: OPERATION_NOT_MARKED_FOR_AUTODIFF and AUTODIFF_CONTEXT_NOT_ENABLED, each
// FAILED_PRECONDITION with its metadata, leaving the session exactly as it was and working.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::StatusCode kFailedPrecondition = absl::StatusCode::kFailedPrecondition;

std::string Id(uint64_t v) { return absl::StrCat(v); }

class AutodiffFailureTest : public ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    REQUIRE_OPS("assign", "mul", "add", "sum", "relu", "detach", "zeros");
    absl::StatusOr<tc::AutodiffContext> ctx = session().OpenAutodiff();
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    ctx_ = std::make_unique<tc::AutodiffContext>(std::move(*ctx));
    ASSERT_OK_AND_ASSIGN(w_, session().Put(tc::HostTensor(std::vector<float>{1, 2, 3, 4}, {2, 2}),
                                           {true, ctx_->id()}));
    ASSERT_OK_AND_ASSIGN(x_, session().Put(tc::HostTensor(std::vector<float>{1, 1, 1, 1}, {2, 2})));
    // Something on the tape, so "the tape is unchanged" means something.
    ASSERT_OK_AND_ASSIGN(y_, w_ * x_);
    ASSERT_OK_AND_ASSIGN(loss_, tc::Sum(y_));
  }

  // The session as it is now; compared after the failing call.
  tc::SessionInfo Snapshot() {
    absl::StatusOr<tc::SessionInfo> info = session().Info();
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : tc::SessionInfo();
  }

  void ExpectUnchanged(const tc::SessionInfo& before) {
    absl::StatusOr<tc::SessionInfo> after = session().Info();
    ASSERT_TRUE(after.ok()) << after.status();
    EXPECT_EQ(*after, before);
  }

  // The session still computes, records and differentiates.
  void ExpectSessionWorks() {
    ASSERT_OK_AND_ASSIGN(tc::AutodiffContext fresh, session().OpenAutodiff());
    ASSERT_OK_AND_ASSIGN(
        tc::Tensor a, session().Put(tc::HostTensor(std::vector<float>{3, -1}), {true, fresh.id()}));
    ASSERT_OK_AND_ASSIGN(tc::Tensor loss, tc::Sum(a * a * 0.5));
    ASSERT_OK_AND_ASSIGN(tc::Gradients g, fresh.Backward({loss}));
    EXPECT_THAT(Floats(g.grad(a)), ElementsAre(3, -1));
    EXPECT_THAT(Floats(w_), ElementsAre(1, 2, 3, 4)) << "the failed call wrote nothing";
  }

  std::unique_ptr<tc::AutodiffContext> ctx_;
  tc::Tensor w_, x_, y_, loss_;
};

// ---- OPERATION_NOT_MARKED_FOR_AUTODIFF ------------------------------------------------------

TEST_F(AutodiffFailureTest, AssignIntoLeafWhileRecordingEager) {
  tc::SessionInfo before = Snapshot();
  absl::StatusOr<std::vector<tc::Tensor>> r =
      session().Op("assign", {w_, tc::HostTensor(std::vector<float>{0, 0, 0, 0}, {2, 2})});
  EXPECT_TRUE(FailsWith(Status(r), kFailedPrecondition, v1::OPERATION_NOT_MARKED_FOR_AUTODIFF,
                        {{"op", "assign"},
                         {"call_index", "0"},
                         {"input_index", "0"},
                         {"tensor_id", Id(w_.handle())},
                         {"context_id", Id(ctx_->id())}}));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("detach"));
  ExpectUnchanged(before);
  ExpectSessionWorks();
}

TEST_F(AutodiffFailureTest, AssignThroughNamedFunction) {
  tc::SessionInfo before = Snapshot();
  absl::StatusOr<std::vector<tc::Tensor>> r = tc::Assign(w_, 0.0);
  EXPECT_TRUE(FailsWith(Status(r), kFailedPrecondition, v1::OPERATION_NOT_MARKED_FOR_AUTODIFF,
                        {{"op", "assign"},
                         {"input_index", "0"},
                         {"tensor_id", Id(w_.handle())},
                         {"context_id", Id(ctx_->id())}}));
  ExpectUnchanged(before);
  ExpectSessionWorks();
}

TEST_F(AutodiffFailureTest, AssignIntoRecordedOutput) {
  tc::SessionInfo before = Snapshot();
  absl::StatusOr<std::vector<tc::Tensor>> r = session().Op("assign", {y_, x_});
  EXPECT_TRUE(FailsWith(Status(r), kFailedPrecondition, v1::OPERATION_NOT_MARKED_FOR_AUTODIFF,
                        {{"op", "assign"},
                         {"input_index", "0"},
                         {"tensor_id", Id(y_.handle())},
                         {"context_id", Id(ctx_->id())}}));
  ExpectUnchanged(before);
  ExpectSessionWorks();
}

TEST_F(AutodiffFailureTest, AutodiffValueOfAssignWhileRecording) {
  tc::SessionInfo before = Snapshot();
  // The autodiff tensor is the value (input 1), the target is plain.
  absl::StatusOr<std::vector<tc::Tensor>> r = session().Op("assign", {x_, w_});
  EXPECT_TRUE(FailsWith(Status(r), kFailedPrecondition, v1::OPERATION_NOT_MARKED_FOR_AUTODIFF,
                        {{"op", "assign"},
                         {"input_index", "1"},
                         {"tensor_id", Id(w_.handle())},
                         {"context_id", Id(ctx_->id())}}));
  ExpectUnchanged(before);
  EXPECT_THAT(Floats(x_), ElementsAre(1, 1, 1, 1));
  ExpectSessionWorks();
}

TEST_F(AutodiffFailureTest, AssignInBatchRollsBackEarlierCalls) {
  tc::SessionInfo before = Snapshot();
  tc::Batch batch = session().NewBatch();
  tc::CallRef doubled = batch.Add("mul", {w_, 2.0});
  tc::CallRef shifted = batch.Add("add", {doubled, x_});
  batch.Add("relu", {shifted});
  batch.Add("assign", {w_, shifted});
  batch.Add("sum", {shifted});
  absl::StatusOr<tc::BatchResult> r = batch.Run();
  EXPECT_TRUE(FailsWith(Status(r), kFailedPrecondition, v1::OPERATION_NOT_MARKED_FOR_AUTODIFF,
                        {{"op", "assign"},
                         {"call_index", "3"},
                         {"input_index", "0"},
                         {"tensor_id", Id(w_.handle())},
                         {"context_id", Id(ctx_->id())}}));
  // Calls 0..2 recorded onto the tape and stored outputs; all of it is gone.
  ExpectUnchanged(before);
  ExpectSessionWorks();
}

TEST_F(AutodiffFailureTest, AssignUnderNoGradIsTheWayOut) {
  tc::Batch update = session().NewBatch({/*no_grad=*/true});
  update.Add("assign", {w_, update.Add("mul", {w_, 0.5})});
  ASSERT_OK(update.Run());
  EXPECT_THAT(Floats(w_), ElementsAre(0.5, 1, 1.5, 2));
  {
    tc::NoGradGuard guard = session().NoGrad();
    ASSERT_OK(tc::Assign(w_, 0.0));
  }
  EXPECT_THAT(Floats(w_), ElementsAre(0, 0, 0, 0));
}

// ---- AUTODIFF_CONTEXT_NOT_ENABLED -----------------------------------------------------------

class ClosedContextTest : public AutodiffFailureTest {
 protected:
  void SetUp() override {
    AutodiffFailureTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_OK(ctx_->Close());
  }
  std::map<std::string, std::string> Closed(const tc::Tensor& t) {
    return {
        {"tensor_id", Id(t.handle())}, {"context_id", Id(ctx_->id())}, {"context_state", "closed"}};
  }
};

TEST_F(ClosedContextTest, NamedOp) {
  tc::SessionInfo before = Snapshot();
  tc::TensorOr r = tc::Relu(w_);
  EXPECT_TRUE(
      FailsWith(Status(r), kFailedPrecondition, v1::AUTODIFF_CONTEXT_NOT_ENABLED, Closed(w_)));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("detach"));
  ExpectUnchanged(before);
  ExpectSessionWorks();
}

TEST_F(ClosedContextTest, Operators) {
  tc::SessionInfo before = Snapshot();
  EXPECT_TRUE(FailsWith(Status(w_ + 1.0), kFailedPrecondition, v1::AUTODIFF_CONTEXT_NOT_ENABLED,
                        Closed(w_)));
  EXPECT_TRUE(FailsWith(Status(x_ * y_), kFailedPrecondition, v1::AUTODIFF_CONTEXT_NOT_ENABLED,
                        Closed(y_)));
  std::map<std::string, std::string> second_input = Closed(y_);
  second_input["input_index"] = "1";
  EXPECT_TRUE(FailsWith(Status(x_ - y_), kFailedPrecondition, v1::AUTODIFF_CONTEXT_NOT_ENABLED,
                        second_input));
  ExpectUnchanged(before);
  ExpectSessionWorks();
}

TEST_F(ClosedContextTest, SessionOp) {
  tc::SessionInfo before = Snapshot();
  EXPECT_TRUE(FailsWith(Status(session().Op("sum", {w_})), kFailedPrecondition,
                        v1::AUTODIFF_CONTEXT_NOT_ENABLED, Closed(w_)));
  ExpectUnchanged(before);
  ExpectSessionWorks();
}

TEST_F(ClosedContextTest, BatchCall) {
  tc::SessionInfo before = Snapshot();
  tc::Batch batch = session().NewBatch();
  tc::CallRef a = batch.Add("mul", {x_, 3.0});
  batch.Add("add", {a, 1.0});
  batch.Add("add", {a, w_});
  std::map<std::string, std::string> md = Closed(w_);
  md["call_index"] = "2";
  md["input_index"] = "1";
  EXPECT_TRUE(
      FailsWith(Status(batch.Run()), kFailedPrecondition, v1::AUTODIFF_CONTEXT_NOT_ENABLED, md));
  ExpectUnchanged(before);
  ExpectSessionWorks();
}

TEST_F(ClosedContextTest, NoGradBatchDoesNotBypassIt) {
  tc::SessionInfo before = Snapshot();
  tc::Batch update = session().NewBatch({/*no_grad=*/true});
  update.Add("assign", {w_, 0.0});
  EXPECT_TRUE(FailsWith(Status(update.Run()), kFailedPrecondition, v1::AUTODIFF_CONTEXT_NOT_ENABLED,
                        Closed(w_)));
  ExpectUnchanged(before);
  ExpectSessionWorks();
}

TEST_F(ClosedContextTest, PutWithRequiresGrad) {
  tc::SessionInfo before = Snapshot();
  absl::StatusOr<tc::Tensor> r =
      session().Put(tc::HostTensor(std::vector<float>{1, 2}), {true, ctx_->id()});
  EXPECT_TRUE(FailsWith(Status(r), kFailedPrecondition, v1::AUTODIFF_CONTEXT_NOT_ENABLED,
                        {{"context_id", Id(ctx_->id())}, {"context_state", "closed"}}));
  ExpectUnchanged(before);
  ExpectSessionWorks();
}

TEST_F(ClosedContextTest, RequiresGradCall) {
  tc::SessionInfo before = Snapshot();
  tc::OpOptions leaf;
  leaf.requires_grad = true;
  leaf.context = ctx_->id();
  EXPECT_TRUE(FailsWith(Status(session().Op1("zeros", {}, {{"shape", {2}}}, leaf)),
                        kFailedPrecondition, v1::AUTODIFF_CONTEXT_NOT_ENABLED,
                        {{"context_id", Id(ctx_->id())}, {"context_state", "closed"}}));
  ExpectUnchanged(before);
  ExpectSessionWorks();
}

TEST_F(ClosedContextTest, Backward) {
  // loss_ was recorded before the close.
  tc::SessionInfo before = Snapshot();
  EXPECT_TRUE(FailsWith(Status(ctx_->Backward({loss_})), kFailedPrecondition,
                        v1::AUTODIFF_CONTEXT_NOT_ENABLED,
                        {{"context_id", Id(ctx_->id())}, {"context_state", "closed"}}));
  ExpectUnchanged(before);
  ExpectSessionWorks();
}

TEST_F(ClosedContextTest, ValuesStayReadableAndDetachable) {
  EXPECT_THAT(Floats(w_), ElementsAre(1, 2, 3, 4));
  ASSERT_OK_AND_ASSIGN(tc::Tensor plain, tc::Detach(w_));
  EXPECT_FALSE(plain.requires_grad());
  ASSERT_OK_AND_ASSIGN(tc::Tensor z, plain * 2.0);
  EXPECT_THAT(Floats(z), ElementsAre(2, 4, 6, 8));
}

// A session created with autodiff disabled refuses every way into autodiff.
class DisabledAutodiffTest : public ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    tc::SessionOptions options;
    options.autodiff = false;
    absl::StatusOr<tc::Session> s = client().CreateSession(options);
    ASSERT_TRUE(s.ok()) << s.status();
    inference_ = std::make_unique<tc::Session>(std::move(*s));
    ASSERT_OK_AND_ASSIGN(x_, inference_->Put(tc::HostTensor(std::vector<float>{1, 2})));
  }
  void ExpectUnchangedAndWorking(const tc::SessionInfo& before) {
    ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, inference_->Info());
    EXPECT_EQ(after, before);
    ASSERT_OK_AND_ASSIGN(tc::Tensor y, x_ * 2.0);
    EXPECT_THAT(Floats(y), ElementsAre(2, 4));
  }
  std::unique_ptr<tc::Session> inference_;
  tc::Tensor x_;
};

TEST_F(DisabledAutodiffTest, PutWithRequiresGrad) {
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, inference_->Info());
  EXPECT_TRUE(FailsWith(Status(inference_->Put(tc::HostTensor(std::vector<float>{1}),
                                               {/*requires_grad=*/true, /*context=*/1})),
                        kFailedPrecondition, v1::AUTODIFF_CONTEXT_NOT_ENABLED,
                        {{"context_state", "disabled"}}));
  ExpectUnchangedAndWorking(before);
}

TEST_F(DisabledAutodiffTest, OpenContext) {
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, inference_->Info());
  EXPECT_TRUE(FailsWith(Status(inference_->OpenAutodiff()), kFailedPrecondition,
                        v1::AUTODIFF_CONTEXT_NOT_ENABLED, {{"context_state", "disabled"}}));
  ExpectUnchangedAndWorking(before);
}

TEST_F(DisabledAutodiffTest, RequiresGradCall) {
  REQUIRE_OPS("ones");
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, inference_->Info());
  tc::OpOptions leaf;
  leaf.requires_grad = true;
  leaf.context = 1;
  EXPECT_TRUE(FailsWith(Status(inference_->Op1("ones", {}, {{"shape", {2}}}, leaf)),
                        kFailedPrecondition, v1::AUTODIFF_CONTEXT_NOT_ENABLED,
                        {{"context_state", "disabled"}}));
  tc::Batch batch = inference_->NewBatch({/*no_grad=*/false, /*context=*/1});
  batch.Add("mul", {x_, 2.0});
  batch.Add("ones", {}, {{"shape", {2}}}, {/*requires_grad=*/true});
  EXPECT_TRUE(FailsWith(Status(batch.Run()), kFailedPrecondition, v1::AUTODIFF_CONTEXT_NOT_ENABLED,
                        {{"context_state", "disabled"}, {"call_index", "1"}}));
  ExpectUnchangedAndWorking(before);
}

}  // namespace
}  // namespace tensord::service_test
