// Planned recordings: a step recorded again through a PlannedRecorder puts nothing on the tape,
// fills the same node objects run after run, and its plan gives the walk's gradients bit for
// bit; a recording that leaves the plan goes on on the tape and its graph walks as ever; a
// plan that reaches nodes recorded before the step is not made.
#include "server/autodiff/recording_plan.h"

#include <gtest/gtest.h>

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
