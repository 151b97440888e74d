// Execute batches: atomic rollback, session isolation, cancellation, concurrent sessions.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

using ::testing::ElementsAre;

class BatchTest : public ServiceTest {};

TEST_F(BatchTest, FailingCallRollsBackTheWholeBatch) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(
      tc::Tensor w, session().Put(tc::HostTensor(std::vector<float>{1, 2, 3}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor v, session().Put(tc::HostTensor(std::vector<float>{5, 5, 5})));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, session().Info());

  tc::Batch batch = session().NewBatch({/*no_grad=*/false, ctx.id()});
  tc::CallRef a = batch.Add("mul", {w, v});                                           // recorded
  tc::CallRef b = batch.Add("ones", {}, {{"shape", {3}}}, {/*requires_grad=*/true});  // a leaf
  batch.Add("assign", {v, 0.0});  // in place, plain
  tc::CallRef c = batch.Add("add", {a, b}, {}, {false, /*fetch=*/true});
  batch.Add("reshape", {c}, {{"shape", {2, 2}}});  // fails: 3 elements
  batch.Add("sum", {c});
  absl::StatusOr<tc::BatchResult> r = batch.Run();
  EXPECT_TRUE(FailsWith(Status(r), absl::StatusCode::kInvalidArgument, v1::SHAPE_MISMATCH,
                        {{"call_index", "4"}, {"op", "reshape"}}));
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("reshape"));
  // No handles, no tape entries, no memory, and the in-place write undone.
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, session().Info());
  EXPECT_EQ(after, before);
  EXPECT_THAT(Floats(v), ElementsAre(5, 5, 5));
  // The same batch, fixed, runs.
  tc::Batch good = session().NewBatch({false, ctx.id()});
  tc::CallRef ga = good.Add("mul", {w, v});
  tc::CallRef gs = good.Add("sum", {ga}, {}, {false, true});
  ASSERT_OK_AND_ASSIGN(tc::BatchResult ok, good.Run());
  EXPECT_THAT(*ok.value(gs).ToVector<float>(), ElementsAre(30));
  ASSERT_OK_AND_ASSIGN(tc::Gradients g, ctx.Backward({ok.output(gs)}));
  EXPECT_THAT(Floats(g.grad(w)), ElementsAre(5, 5, 5));
}

TEST_F(BatchTest, OperandErrorsNeverReachTheServer) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, session().Put(tc::HostTensor(std::vector<float>{1})));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, session().Info());
  tc::TensorOr failed = tc::Reshape(x, {7});
  ASSERT_FALSE(failed.ok());
  tc::Batch batch = session().NewBatch();
  batch.Add("neg", {x});
  batch.Add("add", {x, failed});
  absl::Status s = Status(batch.Run());
  EXPECT_EQ(s, failed.status()) << "the operand's own error comes back";
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, session().Info());
  EXPECT_EQ(after, before);
}

TEST_F(BatchTest, SessionsAreIsolated) {
  ASSERT_OK_AND_ASSIGN(tc::Session other, client().CreateSession());
  ASSERT_OK_AND_ASSIGN(tc::Tensor mine, session().Put(tc::HostTensor(std::vector<float>{1, 2})));
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor theirs, other.Put(tc::HostTensor(std::vector<float>{3})));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo other_before, other.Info());
  // Handle numbers are per session; a handle above every handle of `other` names nothing there.
  tc::Tensor foreign;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(foreign, session().Put(tc::HostTensor(std::vector<float>{0})));
  }
  const uint64_t only_mine = foreign.handle();
  ASSERT_GT(only_mine, theirs.handle());
  const std::string id = absl::StrCat(only_mine);
  EXPECT_TRUE(FailsWith(Status(other.Op("neg", {foreign})), absl::StatusCode::kNotFound,
                        v1::TENSOR_NOT_FOUND, {{"tensor_id", id}}));
  EXPECT_TRUE(FailsWith(Status(other.Op("add", {theirs, tc::Operand::Handle(only_mine)})),
                        absl::StatusCode::kNotFound, v1::TENSOR_NOT_FOUND, {{"tensor_id", id}}));
  EXPECT_TRUE(FailsWith(Status(other.Get(only_mine)), absl::StatusCode::kNotFound,
                        v1::TENSOR_NOT_FOUND, {{"tensor_id", id}}));
  EXPECT_TRUE(FailsWith(Status(other.Release(std::vector<uint64_t>{only_mine})),
                        absl::StatusCode::kNotFound, v1::TENSOR_NOT_FOUND));
  EXPECT_TRUE(FailsWith(Status(other.Put(tc::HostTensor(std::vector<float>{1}), {true, ctx.id()})),
                        absl::StatusCode::kNotFound, v1::CONTEXT_NOT_FOUND))
      << "contexts are per session too";
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo other_after, other.Info());
  EXPECT_EQ(other_after, other_before);
  for (const tc::TensorInfo& t : other_after.tensors) EXPECT_NE(t.handle, only_mine);
  // Still there for its owner.
  EXPECT_THAT(Floats(foreign), ElementsAre(0));
}

// A discarded call's outputs get no handles, yet later calls read them, its fetched values
// come back, and a backward through them reaches the leaves.
TEST_F(BatchTest, DiscardedOutputsAreReadButNotStored) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(
      tc::Tensor w, session().Put(tc::HostTensor(std::vector<float>{1, 1, 1}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, session().Put(tc::HostTensor(std::vector<float>{1, 2, 3})));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, session().Info());
  tc::Batch batch = session().NewBatch({/*no_grad=*/false, ctx.id()});
  tc::CallOptions discard;
  discard.discard = true;
  tc::CallOptions discard_fetched = discard;
  discard_fetched.fetch = true;
  tc::CallRef a = batch.Add("mul", {w, x}, {}, discard);
  tc::CallRef b = batch.Add("mul", {a, 2.0}, {}, discard_fetched);
  tc::CallRef c = batch.Add("sum", {b});
  ASSERT_OK_AND_ASSIGN(tc::BatchResult r, batch.Run());
  EXPECT_TRUE(r.outputs(a.index()).empty());
  EXPECT_TRUE(r.outputs(b.index()).empty());
  ASSERT_EQ(r.values(b.index()).size(), 1u);
  EXPECT_THAT(*r.value(b).ToVector<float>(), ElementsAre(2, 4, 6));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, session().Info());
  EXPECT_EQ(after.tensors.size(), before.tensors.size() + 1) << "only sum's output is stored";
  EXPECT_THAT(Floats(r.output(c)), ElementsAre(12));
  ASSERT_OK_AND_ASSIGN(tc::Gradients g, ctx.Backward({r.output(c)}));
  EXPECT_THAT(Floats(g.grad(w)), ElementsAre(2, 4, 6));
}

// A chain of discarded intermediates holds one or two of them at a time: each goes after the
// call that reads it last. Kept, the same chain passes the session's quota.
TEST_F(BatchTest, DiscardedIntermediatesGoAfterTheirLastReader) {
  constexpr int64_t kFloats = 1 << 18;  // 1 MiB
  tc::SessionOptions small;
  small.memory_quota_bytes = 5 << 20;
  ASSERT_OK_AND_ASSIGN(tc::Session s, client().CreateSession(small));
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, s.Op1("ones", {}, {{"shape", {kFloats}}}));
  for (bool discarded : {true, false}) {
    tc::Batch batch = s.NewBatch({/*no_grad=*/true});
    tc::CallOptions options;
    options.discard = discarded;
    tc::Operand h = x;
    for (int i = 0; i < 8; ++i) h = batch.Add("add", {h, 1.0}, {}, options);
    tc::CallRef total = batch.Add("sum", {h}, {}, {false, /*fetch=*/true});
    absl::StatusOr<tc::BatchResult> r = batch.Run();
    if (discarded) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_THAT(*r->value(total).ToVector<float>(), ElementsAre(9.0f * kFloats));
    } else {
      EXPECT_TRUE(
          FailsWith(Status(r), absl::StatusCode::kResourceExhausted, v1::QUOTA_EXCEEDED, {}));
    }
  }
}

TEST_F(BatchTest, CancelledBatchRollsBack) {
  REQUIRE_OPS("sum");
  // 16 MiB read per call, a few hundred calls: far longer than the deadline.
  ASSERT_OK_AND_ASSIGN(tc::Tensor big, session().Op1("ones", {}, {{"shape", {4 << 20}}}));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, session().Info());
  tc::ClientOptions hasty;
  hasty.call_timeout_ms = 100;
  ASSERT_OK_AND_ASSIGN(tc::Client impatient,
                       tc::Client::Connect(absl::StrCat("127.0.0.1:", server().port()), hasty));
  ASSERT_OK_AND_ASSIGN(tc::Session same, impatient.AttachSession(session().id()));
  tc::Batch batch = same.NewBatch();
  for (int i = 0; i < 400; ++i) batch.Add("sum", {big});
  absl::Status s = Status(batch.Run());
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  // Info waits for the batch to end on the server: nothing of it remains.
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, session().Info());
  EXPECT_EQ(after, before);
  ASSERT_OK_AND_ASSIGN(tc::Tensor total, tc::Sum(big));
  EXPECT_EQ(*total.Item(), static_cast<double>(4 << 20));
}

TEST_F(BatchTest, SessionsRunConcurrently) {
  constexpr int kThreads = 4, kSteps = 25;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      absl::StatusOr<tc::Session> s = client().CreateSession();
      if (!s.ok()) {
        ++failures;
        return;
      }
      absl::StatusOr<tc::Tensor> acc = s->Put(tc::HostTensor(std::vector<double>{0.0}));
      for (int i = 0; i < kSteps && acc.ok(); ++i) {
        tc::Batch b = s->NewBatch({/*no_grad=*/true});
        b.Add("assign", {*acc, b.Add("add", {*acc, static_cast<double>(t + 1)})});
        if (!b.Run().ok()) ++failures;
      }
      absl::StatusOr<double> v = acc.ok() ? acc->Item() : acc.status();
      if (!v.ok() || *v != static_cast<double>((t + 1) * kSteps)) ++failures;
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace tensord::service_test
