// Fusion inside Execute batches (server/service/batch_fusion.h): a product whose discarded
// output feeds discarded pointwise calls runs as one fused call; what cannot fuse runs as
// written, and errors name the calls the client wrote.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/status.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

using ::testing::ElementsAre;

class BatchFusionTest : public ServiceTest {
 protected:
  // x [4, 3] @ w [3, 2] + b [2], then relu; w and b requires-grad leaves of a new context.
  struct Step {
    tc::AutodiffContext ctx;
    tc::Tensor x, w, b;
  };
  static absl::StatusOr<Step> MakeStep(tc::Session& s) {
    ASSIGN_OR_RETURN(tc::AutodiffContext ctx, s.OpenAutodiff());
    const std::vector<float> x = {1, -2, 3, -4, 5, -6, 7, -8, 9, -1, 2, -3};
    ASSIGN_OR_RETURN(tc::Tensor xt, s.Put(tc::HostTensor(x, {4, 3})));
    ASSIGN_OR_RETURN(
        tc::Tensor wt,
        s.Put(tc::HostTensor(std::vector<float>{0.5f, -1, 0.25f, 2, -0.75f, 1}, {3, 2}),
              {true, ctx.id()}));
    ASSIGN_OR_RETURN(tc::Tensor bt,
                     s.Put(tc::HostTensor(std::vector<float>{0.5f, -0.5f}, {2}), {true, ctx.id()}));
    return Step{std::move(ctx), xt, wt, bt};
  }
  // The step's forward as one batch; `discard` on the product and the add. Returns relu's
  // output, and the tape's nodes after the batch.
  static absl::StatusOr<std::pair<tc::Tensor, uint64_t>> Forward(tc::Session& s, Step& step,
                                                                 bool discard) {
    tc::Batch batch = s.NewBatch({/*no_grad=*/false, step.ctx.id()});
    tc::CallOptions absorbed;
    absorbed.discard = discard;
    tc::CallRef mm = batch.Add("matmul", {step.x, step.w}, {}, absorbed);
    tc::CallRef biased = batch.Add("add", {mm, step.b}, {}, absorbed);
    tc::CallRef y = batch.Add("relu", {biased});
    ASSIGN_OR_RETURN(tc::BatchResult r, batch.Run());
    ASSIGN_OR_RETURN(tc::SessionInfo info, s.Info());
    uint64_t nodes = 0;
    for (const tc::ContextInfo& c : info.contexts) {
      if (c.context_id == step.ctx.id()) nodes = c.tape_nodes;
    }
    return std::make_pair(r.output(y), nodes);
  }
};

TEST_F(BatchFusionTest, ADiscardedChainRunsAsOneRecordedCall) {
  std::vector<std::vector<float>> values, grad_w, grad_b;
  for (bool discard : {true, false}) {
    ASSERT_OK_AND_ASSIGN(Step step, MakeStep(session()));
    ASSERT_OK_AND_ASSIGN(auto forward, Forward(session(), step, discard));
    EXPECT_EQ(forward.second, discard ? 1u : 3u) << "tape nodes, discard=" << discard;
    values.push_back(Floats(forward.first));
    ASSERT_OK_AND_ASSIGN(tc::Tensor loss, tc::Sum(forward.first));
    ASSERT_OK_AND_ASSIGN(tc::Gradients g, step.ctx.Backward({loss}));
    grad_w.push_back(Floats(g.grad(step.w)));
    grad_b.push_back(Floats(g.grad(step.b)));
  }
  // relu(x @ w + b): x @ w + b is [[-1.75, -2.5], [4.25, 7.5], [-4.75, -14.5], [2.75, 1.5]].
  EXPECT_THAT(values[0], ElementsAre(0, 0, 4.25f, 7.5f, 0, 0, 2.75f, 1.5f));
  EXPECT_EQ(values[0], values[1]);
  EXPECT_EQ(grad_w[0], grad_w[1]);
  EXPECT_EQ(grad_b[0], grad_b[1]);
  EXPECT_THAT(grad_b[0], ElementsAre(2, 2));
  EXPECT_THAT(grad_w[0], ElementsAre(-5, -5, 7, 7, -9, -9));
}

TEST_F(BatchFusionTest, WithFusionOffTheCallsRunAsWritten) {
  ServerOptions options = TestServerOptions();
  options.fusion = false;
  std::unique_ptr<ServerAndClient> off = StartServer(options);
  ASSERT_NE(off, nullptr);
  ASSERT_OK_AND_ASSIGN(tc::Session s, off->client->CreateSession());
  ASSERT_OK_AND_ASSIGN(Step step, MakeStep(s));
  ASSERT_OK_AND_ASSIGN(auto forward, Forward(s, step, /*discard=*/true));
  EXPECT_EQ(forward.second, 3u);
  EXPECT_THAT(Floats(forward.first), ElementsAre(0, 0, 4.25f, 7.5f, 0, 0, 2.75f, 1.5f));
}

// A bias that would widen the product (the unfused add broadcasts [4, 1] to [4, 2]) cannot
// be a post-op: the calls run as written.
TEST_F(BatchFusionTest, AnOperandThatWidensTheProductRunsAsWritten) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, session().Put(tc::HostTensor(
                                         std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, {4, 2})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor w,
                       session().Put(tc::HostTensor(std::vector<float>{1, 1}, {2, 1})));
  ASSERT_OK_AND_ASSIGN(
      tc::Tensor wide,
      session().Put(tc::HostTensor(std::vector<float>{0, 10, 0, 10, 0, 10, 0, 10}, {4, 2})));
  tc::Batch batch = session().NewBatch({/*no_grad=*/true});
  tc::CallOptions discard;
  discard.discard = true;
  tc::CallRef mm = batch.Add("matmul", {x, w}, {}, discard);
  tc::CallRef sum = batch.Add("add", {mm, wide});
  ASSERT_OK_AND_ASSIGN(tc::BatchResult r, batch.Run());
  EXPECT_THAT(Floats(r.output(sum)), ElementsAre(3, 13, 7, 17, 11, 21, 15, 25));
}

// A failing chain reports the call the client wrote, not the fused call.
TEST_F(BatchFusionTest, AFailingChainNamesTheCallAsWritten) {
  ASSERT_OK_AND_ASSIGN(Step step, MakeStep(session()));
  ASSERT_OK_AND_ASSIGN(tc::Tensor bad_bias,
                       session().Put(tc::HostTensor(std::vector<float>{1, 2, 3}, {3})));
  tc::Batch batch = session().NewBatch({/*no_grad=*/true});
  tc::CallOptions discard;
  discard.discard = true;
  tc::CallRef mm = batch.Add("matmul", {step.x, step.w}, {}, discard);
  batch.Add("add", {mm, bad_bias});
  EXPECT_TRUE(FailsWith(Status(batch.Run()), absl::StatusCode::kInvalidArgument, v1::SHAPE_MISMATCH,
                        {{"call_index", "1"}, {"op", "add"}}));
}

// The fused call reads its operands at the product's place: a write between the product and
// its chain (here into the bias) keeps the chain unfused, so the add sees the written bias.
TEST_F(BatchFusionTest, AWriteBetweenTheProductAndItsChainKeepsTheOrder) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x,
                       session().Put(tc::HostTensor(std::vector<float>{1, 2, 3, 4}, {2, 2})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor w,
                       session().Put(tc::HostTensor(std::vector<float>{1, 0, 0, 1}, {2, 2})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, session().Put(tc::HostTensor(std::vector<float>{0, 0}, {2})));
  tc::Batch batch = session().NewBatch({/*no_grad=*/true});
  tc::CallOptions discard;
  discard.discard = true;
  tc::CallRef mm = batch.Add("matmul", {x, w}, {}, discard);
  batch.Add("assign", {b, tc::HostTensor(std::vector<float>{100, 200}, {2})}, {}, discard);
  tc::CallRef sum = batch.Add("add", {mm, b}, {}, discard);
  tc::CallRef y = batch.Add("relu", {sum});
  ASSERT_OK_AND_ASSIGN(tc::BatchResult r, batch.Run());
  EXPECT_THAT(Floats(r.output(y)), ElementsAre(101, 202, 103, 204));
}

// An operand the chain adds that a later call makes (a residual computed after the product)
// does not exist at the product's place: that link ends the chain.
TEST_F(BatchFusionTest, AnOperandMadeAfterTheProductEndsTheChain) {
  ASSERT_OK_AND_ASSIGN(Step step, MakeStep(session()));
  tc::Batch batch = session().NewBatch({/*no_grad=*/true});
  tc::CallOptions discard;
  discard.discard = true;
  tc::CallRef mm = batch.Add("matmul", {step.x, step.w}, {}, discard);
  tc::CallRef later = batch.Add("mul", {step.b, 2.0}, {}, discard);
  tc::CallRef sum = batch.Add("add", {mm, later}, {}, discard);
  tc::CallRef y = batch.Add("relu", {sum});
  ASSERT_OK_AND_ASSIGN(tc::BatchResult r, batch.Run());
  EXPECT_THAT(Floats(r.output(y)), ElementsAre(0, 0, 4.75f, 7, 0, 0, 3.25f, 1));
}

}  // namespace
}  // namespace tensord::service_test
