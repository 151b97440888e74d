// Planned recordings: a step recorded again through a PlannedRecorder puts nothing on the tape,
// fills the same node objects run after run, and its plan gives the walk's gradients bit for
// bit; a recording that leaves the plan goes on on the tape and its graph walks as ever; a
// plan that reaches nodes recorded before the step is not made.
#include "server/autodiff/recording_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "tests/autodiff/recorded_step.h"

namespace tensord {
namespace {

class RecordingPlanTest : public RecordedStepTest {
 protected:
  // Plans the step's backward and recording from one recording of it (seed 1) on the tape.
  void PlanStep(const Leaves& p) {
    const size_t start = ctx_.tape_size();
    const Tensor root = RecordStep(p, 1);
    BackwardGraph graph;
    auto planned = PlanBackward(ctx_, {root}, graph);
    ASSERT_TRUE(planned.ok()) << planned.status();
    plan_ = *std::move(planned);
    recording_ = PlanRecording(plan_, graph, ctx_.NodesSince(start));
    ASSERT_TRUE(recording_.has_value());
  }

  BackwardPlan plan_;
  std::optional<RecordingPlan> recording_;
  std::vector<std::shared_ptr<Node>> nodes_;  // what a program keeps
};

TEST_F(RecordingPlanTest, ARunFillsThePlannedNodesInsteadOfTheTapeAndGivesTheWalksBits) {
  Leaves p = MakeLeaves();
  PlanStep(p);
  EXPECT_EQ(recording_->entries.size(), ctx_.tape_size()) << "every node of the step";
  const size_t tape = ctx_.tape_size();
  std::vector<const Node*> first_run;
  for (uint32_t seed : {2u, 5u}) {  // new inputs, and the leaves changed in between
    if (seed == 5) p.w = Leaf({3, 3}, 9, 11);
    PlannedRecorder recorder(plan_, *recording_, nodes_);
    env_.recorder = &recorder;
    const Tensor root = RecordStep(p, seed);
    env_.recorder = nullptr;
    EXPECT_TRUE(recorder.on_plan());
    EXPECT_EQ(ctx_.tape_size(), tape) << "nothing on the tape";
    BackwardGraph graph;
    ASSERT_TRUE(recorder.Graph({root}, graph));
    std::vector<const Node*> nodes(graph.nodes.begin(), graph.nodes.end());
    if (seed == 2) {
      first_run = nodes;
    } else {
      EXPECT_EQ(nodes, first_run) << "the same node objects, filled again";
    }
    DispatchRunner runner(TestDispatcher(), plain_);
    auto run = RunBackwardPlan(plan_, graph, {root}, {}, runner);
    ASSERT_TRUE(run.ok()) << run.status();
    std::map<uint64_t, Tensor> walked = Walk(root);  // the nodes' own links, as the walk reads
    ASSERT_EQ(walked.size(), 3u);
    for (size_t l = 0; l < run->size(); ++l) {
      ASSERT_TRUE((*run)[l].defined()) << l;
      EXPECT_TRUE(AllClose((*run)[l], walked[plan_.leaf_ids[l]], 0, 0))
          << "leaf " << plan_.leaf_ids[l];
    }
  }
  for (const auto& node : nodes_) {
    EXPECT_TRUE(node->inputs.empty() && node->outputs.empty() && node->input_meta.empty())
        << "a run's saved values and links are freed with it";
  }
}

TEST_F(RecordingPlanTest, ARecordingThatLeavesThePlanGoesOnOnTheTape) {
  Leaves p = MakeLeaves();
  PlanStep(p);
  Leaves plain_u = p;
  plain_u.u = Random(DType::kF64, {3}, 3);
  Leaves other_leaf = p;
  other_leaf.b = Leaf({3}, 2, 99);
  struct Case {
    const char* what;
    Leaves leaves;
    bool extra;
  };
  for (const Case& c : {Case{"another op on the path", p, true},
                        Case{"an input without autodiff identity", plain_u, false},
                        Case{"another leaf", other_leaf, false}}) {
    const size_t tape = ctx_.tape_size();
    PlannedRecorder recorder(plan_, *recording_, nodes_);
    env_.recorder = &recorder;
    const Tensor root = RecordStep(c.leaves, 2, c.extra);
    env_.recorder = nullptr;
    EXPECT_FALSE(recorder.on_plan()) << c.what;
    EXPECT_GT(ctx_.tape_size(), tape) << c.what << ": the rest went on the tape";
    BackwardGraph graph;
    EXPECT_FALSE(recorder.Graph({root}, graph)) << c.what;
    // The walk reaches the planned nodes the run filled before it left the plan as well.
    std::map<uint64_t, Tensor> walked = Walk(root);
    ctx_.TruncateTape(tape);
    const Tensor again = RecordStep(c.leaves, 2, c.extra);  // all on the tape
    std::map<uint64_t, Tensor> expected = Walk(again);
    ASSERT_EQ(walked.size(), expected.size()) << c.what;
    for (const auto& [id, grad] : expected) {
      EXPECT_TRUE(AllClose(walked[id], grad, 0, 0)) << c.what << ": leaf " << id;
    }
    ctx_.TruncateTape(tape);
  }
  PlannedRecorder recorder(plan_, *recording_, nodes_);
  env_.recorder = &recorder;
  const Tensor root = RecordStep(p, 3);
  env_.recorder = nullptr;
  BackwardGraph graph;
  EXPECT_FALSE(recorder.Graph({root, root}, graph)) << "another number of roots";
  EXPECT_TRUE(recorder.Graph({root}, graph)) << "the step itself";
}

// BALANCED: the planned nodes keep what recomputation needs (a producer instead of a value),
// and a pass that frees each node after its last reader gives the bits of a walk of the same
// step recorded on the tape.
TEST(RecordingPlanBalanced, ARunRecomputesFromThePlannedNodes) {
  AutodiffContext ctx(kContext, Checkpointing::kBalanced);
  CallEnv env;
  env.contexts = [&ctx](uint64_t id) { return id == kContext ? &ctx : nullptr; };
  CallEnv plain = env;
  plain.no_grad = true;
  Tensor w = Random(DType::kF64, {5, 5}, 81);
  w.set_autograd(MakeLeafMeta(kContext, 1));
  auto call = [&](const std::string& op, std::vector<Tensor> in) {
    auto outs = TestDispatcher().Call(op, std::move(in), {}, env);
    EXPECT_TRUE(outs.ok()) << op << ": " << outs.status();
    return outs.ok() ? (*outs)[0] : Tensor();
  };
  // sin and tanh are recomputed from the product, whose output is kept.
  auto step = [&](uint32_t seed) {
    const Tensor x = Random(DType::kF64, {3, 5}, seed);
    return call("sum", {call("tanh", {call("sin", {call("matmul", {x, w})})})});
  };
  BackwardGraph graph;
  const Tensor trial = step(1);
  auto plan = PlanBackward(ctx, {trial}, graph);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::optional<RecordingPlan> recording = PlanRecording(*plan, graph, ctx.NodesSince(0));
  ASSERT_TRUE(recording.has_value());
  ctx.TruncateTape(0);
  std::vector<std::shared_ptr<Node>> nodes;
  DispatchRunner runner(TestDispatcher(), plain);
  Tensor planned;
  {
    PlannedRecorder recorder(*plan, *recording, nodes);
    env.recorder = &recorder;
    const Tensor root = step(2);
    env.recorder = nullptr;
    ASSERT_TRUE(recorder.Graph({root}, graph));
    EXPECT_TRUE(std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const Node* n) {
      return n->outputs.empty();
    })) << "BALANCED keeps no output of a memory-bound node";
    auto run = RunBackwardPlan(*plan, graph, {root}, {}, runner, nullptr, /*free_saved=*/true);
    ASSERT_TRUE(run.ok()) << run.status();
    planned = (*run)[0];
  }
  const Tensor root = step(2);  // on the tape
  auto walked = RunBackward(ctx, {root}, {}, /*retain_graph=*/false, runner);
  ASSERT_TRUE(walked.ok()) << walked.status();
  ASSERT_EQ(walked->size(), 1u);
  EXPECT_TRUE(AllClose(planned, (*walked)[0].grad, 0, 0));
}

TEST_F(RecordingPlanTest, APlanReachingNodesRecordedBeforeTheStepHasNoRecording) {
  Leaves p = MakeLeaves();
  p.b = Call1("tanh", {p.b});  // an autodiff tensor of an earlier call
  const size_t start = ctx_.tape_size();
  const Tensor root = RecordStep(p, 1);
  BackwardGraph graph;
  auto planned = PlanBackward(ctx_, {root}, graph);
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_FALSE(PlanRecording(*planned, graph, ctx_.NodesSince(start)).has_value());
  EXPECT_TRUE(PlanRecording(*planned, graph, ctx_.NodesSince(start - 1)).has_value())
      << "with the earlier call recorded in the step";
}

}  // namespace
}  // namespace tensord
