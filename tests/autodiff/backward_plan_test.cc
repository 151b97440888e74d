// Backward plans: a plan made from one recording of a step runs on another recording of the
// same step and gives the walk's gradients bit for bit; a recording of another shape is not
// taken for the planned one.
#include "server/autodiff/backward_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "tests/autodiff/recorded_step.h"

namespace tensord {
namespace {
using namespace testing;

class BackwardPlanTest : public RecordedStepTest {};

TEST_F(BackwardPlanTest, APlanRunsOnAnotherRecordingOfTheStepAndGivesTheWalksBits) {
  Leaves p = MakeLeaves();
  BackwardGraph first;
  auto planned = PlanBackward(ctx_, {RecordStep(p, 1)}, first);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const BackwardPlan& plan = *planned;
  EXPECT_EQ(plan.leaf_ids.size(), 3u);
  EXPECT_GE(plan.steps.size(), 8u);

  for (uint32_t seed : {2u, 5u}) {  // new inputs, and the leaves changed in between
    if (seed == 5) p.w = Leaf({3, 3}, 9, 11);
    const Tensor root = RecordStep(p, seed);
    BackwardGraph graph;
    ASSERT_TRUE(FindPlannedGraph(plan, {root}, graph)) << "the same step, recorded again";
    for (const Node* node : graph.nodes) {
      EXPECT_TRUE(std::find(first.nodes.begin(), first.nodes.end(), node) == first.nodes.end())
          << "a node of the first recording";
    }
    DispatchRunner runner(TestDispatcher(), plain_);
    auto run = RunBackwardPlan(plan, graph, {root}, {}, runner);
    ASSERT_TRUE(run.ok()) << run.status();
    const std::vector<Tensor>& grads = *run;
    std::map<uint64_t, Tensor> walked = Walk(root);
    ASSERT_EQ(walked.size(), 3u);
    for (size_t l = 0; l < grads.size(); ++l) {
      ASSERT_TRUE(grads[l].defined()) << l;
      const Tensor& expected = walked[plan.leaf_ids[l]];
      ASSERT_TRUE(expected.defined()) << plan.leaf_ids[l];
      EXPECT_TRUE(AllClose(grads[l], expected, 0, 0)) << "leaf " << plan.leaf_ids[l];
    }
  }
}

// The plan's own arithmetic: w's gradient is the sum of what its two uses send it.
TEST_F(BackwardPlanTest, ALeafUsedTwiceGetsTheSumOfBothUses) {
  Leaves once = MakeLeaves();
  once.w_again = Leaf({3, 3}, 1, 14);  // the same values as w, another leaf
  BackwardGraph graph;
  const Tensor root = RecordStep(once, 4);
  auto planned = PlanBackward(ctx_, {root}, graph);
  ASSERT_TRUE(planned.ok()) << planned.status();
  DispatchRunner runner(TestDispatcher(), plain_);
  auto split = RunBackwardPlan(*planned, graph, {root}, {}, runner);
  ASSERT_TRUE(split.ok()) << split.status();
  std::map<uint64_t, Tensor> by_id;
  for (size_t l = 0; l < split->size(); ++l) by_id[planned->leaf_ids[l]] = (*split)[l];

  Leaves twice = MakeLeaves();
  const Tensor joined_root = RecordStep(twice, 4);
  auto joined_plan = PlanBackward(ctx_, {joined_root}, graph);
  ASSERT_TRUE(joined_plan.ok()) << joined_plan.status();
  auto joined = RunBackwardPlan(*joined_plan, graph, {joined_root}, {}, runner);
  ASSERT_TRUE(joined.ok()) << joined.status();
  for (size_t l = 0; l < joined->size(); ++l) {
    const uint64_t id = joined_plan->leaf_ids[l];
    const Tensor expected = id == 11 ? Run1("add", {by_id[11], by_id[14]}) : by_id[id];
    EXPECT_TRUE(AllClose((*joined)[l], expected, 1e-12, 1e-12)) << "leaf " << id;
  }
}

// What an account held, sampled after every op the backward runs.
class PeakRunner : public OpRunner {
 public:
  PeakRunner(OpRunner& inner, const MemoryAccount& account) : inner_(inner), account_(account) {}
  absl::StatusOr<std::vector<Tensor>> Run(const std::string& op, std::vector<Tensor> inputs,
                                          AttrMap attrs) override {
    auto outs = inner_.Run(op, std::move(inputs), std::move(attrs));
    last = account_.used();
    peak = std::max(peak, last);
    return outs;
  }
  int64_t peak = 0;
  int64_t last = 0;  // after the last op

 private:
  OpRunner& inner_;
  const MemoryAccount& account_;
};

// BALANCED recomputes memory-bound values in the backward; each is dropped after the last step
// that reads it. (The root's step recomputes every branch at once, since each rule is handed its
// node's outputs: the pass starts at its peak and its bytes go down as the branches are done.)
TEST(BackwardPlanBalanced, RecomputedValuesAreDroppedAfterTheirLastReader) {
  constexpr int64_t kN = 1 << 17;  // f64: 1 MiB
  auto account = std::make_shared<MemoryAccount>(int64_t{1} << 30);
  AutodiffContext ctx(kContext, Checkpointing::kBalanced);
  CallEnv env;
  env.account = account;
  env.contexts = [&ctx](uint64_t id) { return id == kContext ? &ctx : nullptr; };
  auto call = [&](const std::string& op, std::vector<Tensor> in) {
    auto outs = TestDispatcher().Call(op, std::move(in), {}, env);
    EXPECT_TRUE(outs.ok()) << op << ": " << outs.status();
    return outs.ok() ? (*outs)[0] : Tensor();
  };
  std::vector<Tensor> sums;
  for (uint32_t seed : {1u, 2u, 3u}) {  // three branches: sum(sin(sin(sin(sin(leaf)))))
    Tensor leaf = CastTo(Random(DType::kF64, {kN}, seed), DType::kF64);
    leaf.set_autograd(MakeLeafMeta(kContext, seed));
    Tensor h = leaf;
    for (int k = 0; k < 4; ++k) h = call("sin", {h});
    sums.push_back(call("sum", {h}));
  }
  const Tensor root = call("add", {call("add", {sums[0], sums[1]}), sums[2]});
  BackwardGraph graph;
  auto plan = PlanBackward(ctx, {root}, graph);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CallEnv plain = env;
  plain.no_grad = true;
  DispatchRunner dispatch(TestDispatcher(), plain);
  PeakRunner runner(dispatch, *account);
  const int64_t before = account->used();
  auto grads = RunBackwardPlan(*plan, graph, {root}, {}, runner);
  ASSERT_TRUE(grads.ok()) << grads.status();
  const int64_t mib = kN * 8;
  EXPECT_GE(runner.peak - before, 12 * mib) << "three branches of four recomputed values";
  // At the last op: the three leaves' gradients and the last rule's operands and temporaries
  // (6 MiB); the twelve recomputed values would be another 12 MiB.
  EXPECT_LE(runner.last - before, 7 * mib) << "recomputed values held to the end";
}

// With free_saved a node's saved values go once its step ran: at the chain's last step the
// intermediates it saved are gone, and the gradient has the same bits.
TEST(BackwardPlanFreeing, SavedValuesGoAsThePassGoes) {
  constexpr int64_t kN = 1 << 17;  // f64: 1 MiB
  constexpr int64_t kMiB = kN * 8;
  auto account = std::make_shared<MemoryAccount>(int64_t{1} << 30);
  AutodiffContext ctx(kContext, Checkpointing::kNone);
  CallEnv env;
  env.account = account;
  env.contexts = [&ctx](uint64_t id) { return id == kContext ? &ctx : nullptr; };
  CallEnv plain = env;
  plain.no_grad = true;
  Tensor leaf = CastTo(Random(DType::kF64, {kN}, 5), DType::kF64);
  leaf.set_autograd(MakeLeafMeta(kContext, 1));
  int64_t last[2] = {0, 0};
  Tensor grads[2];
  for (const bool free_saved : {false, true}) {
    Tensor h = leaf;
    for (int k = 0; k < 8; ++k) {  // eight sins: each node saves its input and output
      auto outs = TestDispatcher().Call("sin", {h}, {}, env);
      ASSERT_TRUE(outs.ok()) << outs.status();
      h = (*outs)[0];
    }
    auto sum = TestDispatcher().Call("sum", {h}, {}, env);
    ASSERT_TRUE(sum.ok()) << sum.status();
    const Tensor root = (*sum)[0];
    h = Tensor();  // the intermediates are held by the graph alone
    BackwardGraph graph;
    auto plan = PlanBackward(ctx, {root}, graph);
    ASSERT_TRUE(plan.ok()) << plan.status();
    DispatchRunner dispatch(TestDispatcher(), plain);
    PeakRunner runner(dispatch, *account);
    auto run = RunBackwardPlan(*plan, graph, {root}, {}, runner, nullptr, free_saved);
    ASSERT_TRUE(run.ok()) << run.status();
    last[free_saved] = runner.last;
    grads[free_saved] = (*run)[0];
    for (const Node* node : graph.nodes) {
      EXPECT_EQ(node->freed, free_saved);
      EXPECT_EQ(node->inputs.empty(), free_saved);
    }
    ctx.TruncateTape(0);
  }
  EXPECT_TRUE(AllClose(grads[1], grads[0], 0, 0));
  EXPECT_LE(last[1], last[0] - 6 * kMiB) << "seven intermediates held to the last step";
}

TEST_F(BackwardPlanTest, ARecordingOfAnotherShapeIsNotThePlannedOne) {
  Leaves p = MakeLeaves();
  BackwardGraph graph;
  auto planned = PlanBackward(ctx_, {RecordStep(p, 1)}, graph);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const BackwardPlan& plan = *planned;

  EXPECT_FALSE(FindPlannedGraph(plan, {RecordStep(p, 2, /*extra=*/true)}, graph))
      << "another op on the path";
  Leaves plain_u = p;
  plain_u.u = Random(DType::kF64, {3}, 3);
  EXPECT_FALSE(FindPlannedGraph(plan, {RecordStep(plain_u, 2)}, graph))
      << "an input without autodiff identity";
  Leaves other_leaf = p;
  other_leaf.b = Leaf({3}, 2, 99);
  EXPECT_FALSE(FindPlannedGraph(plan, {RecordStep(other_leaf, 2)}, graph)) << "another leaf";
  const Tensor root = RecordStep(p, 2);
  EXPECT_FALSE(FindPlannedGraph(plan, {root, root}, graph)) << "another number of roots";
  EXPECT_TRUE(FindPlannedGraph(plan, {root}, graph));
}

TEST_F(BackwardPlanTest, APlannedBackwardFreesNothingAndTheWalkStillFrees) {
  Leaves p = MakeLeaves();
  const Tensor root = RecordStep(p, 1);
  BackwardGraph graph;
  auto planned = PlanBackward(ctx_, {root}, graph);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const BackwardPlan& plan = *planned;
  DispatchRunner runner(TestDispatcher(), plain_);
  for (int run = 0; run < 2; ++run) {
    auto grads = RunBackwardPlan(plan, graph, {root}, {}, runner);
    ASSERT_TRUE(grads.ok()) << grads.status();
  }
  const size_t live = ctx_.live_nodes();
  auto walked = RunBackward(ctx_, {root}, {}, /*retain_graph=*/false, runner);
  ASSERT_TRUE(walked.ok()) << walked.status();
  EXPECT_LT(ctx_.live_nodes(), live);
  EXPECT_FALSE(FindPlannedGraph(plan, {root}, graph)) << "a freed graph";
  auto again = RunBackward(ctx_, {root}, {}, false, runner);
  EXPECT_EQ(GetReason(again.status()), Reason::kGraphFreed) << again.status();
}

// Counts the ops a backward runs, so a test can tell when something happened.
class CountingRunner : public OpRunner {
 public:
  explicit CountingRunner(OpRunner& inner) : inner_(inner) {}
  absl::StatusOr<std::vector<Tensor>> Run(const std::string& op, std::vector<Tensor> inputs,
                                          AttrMap attrs) override {
    ++ops;
    return inner_.Run(op, std::move(inputs), std::move(attrs));
  }
  int ops = 0;

 private:
  OpRunner& inner_;
};

// Records what a backward tells it, and when (in ops run so far).
class RecordingSink : public LeafGradientSink {
 public:
  explicit RecordingSink(const CountingRunner& runner) : runner_(runner) {}
  absl::Status Begin(const BackwardPlan&) override {
    ++begun;
    return absl::OkStatus();
  }
  absl::Status Final(uint64_t leaf, const Tensor& grad) override {
    told.push_back({leaf, grad, runner_.ops});
    return fail_at == leaf ? Error(Reason::kInternal, "the sink refuses") : absl::OkStatus();
  }
  absl::Status End() override {
    ended_after = static_cast<int>(told.size());
    return absl::OkStatus();
  }
  struct Told {
    uint64_t leaf;
    Tensor grad;
    int ops;
  };
  int begun = 0;
  int ended_after = -1;
  uint64_t fail_at = 0;
  std::vector<Told> told;

 private:
  const CountingRunner& runner_;
};

// A sink hears of u (added last) first and of w (used by both products, so final only after
// the first product's gradient) last, each while the backward still has ops to run, with the
// gradient the backward returns.
TEST_F(BackwardPlanTest, EachLeafIsToldOnceAsSoonAsItsGradientIsFinal) {
  Leaves p = MakeLeaves();
  const Tensor root = RecordStep(p, 1);
  BackwardGraph graph;
  auto planned = PlanBackward(ctx_, {root}, graph);
  ASSERT_TRUE(planned.ok()) << planned.status();
  DispatchRunner dispatch(TestDispatcher(), plain_);
  CountingRunner runner(dispatch);
  RecordingSink sink(runner);
  auto grads = RunBackwardPlan(*planned, graph, {root}, {}, runner, &sink);
  ASSERT_TRUE(grads.ok()) << grads.status();
  EXPECT_EQ(sink.begun, 1);
  EXPECT_EQ(sink.ended_after, 3);
  ASSERT_EQ(sink.told.size(), 3u);
  EXPECT_EQ(sink.told[0].leaf, 13u) << "u, added last, is final first";
  EXPECT_EQ(sink.told[1].leaf, 12u) << "then b";
  EXPECT_EQ(sink.told[2].leaf, 11u) << "w only after the first product's gradient";
  EXPECT_LT(sink.told[0].ops, sink.told[1].ops);
  EXPECT_LT(sink.told[1].ops, sink.told[2].ops);
  EXPECT_LT(sink.told[0].ops, runner.ops / 2) << "u is told while most of the backward is left";
  for (const auto& t : sink.told) {
    const auto l = std::find(planned->leaf_ids.begin(), planned->leaf_ids.end(), t.leaf) -
                   planned->leaf_ids.begin();
    EXPECT_EQ(t.grad.storage(), (*grads)[l].storage()) << "leaf " << t.leaf;
  }

  // A sink's error stops the backward there.
  const Tensor again = RecordStep(p, 2);
  BackwardGraph second;
  auto plan2 = PlanBackward(ctx_, {again}, second);
  ASSERT_TRUE(plan2.ok());
  CountingRunner counted(dispatch);
  RecordingSink refusing(counted);
  refusing.fail_at = 12;
  auto failed = RunBackwardPlan(*plan2, second, {again}, {}, counted, &refusing);
  EXPECT_EQ(GetReason(failed.status()), Reason::kInternal) << failed.status();
  EXPECT_EQ(refusing.told.size(), 2u);
  EXPECT_EQ(refusing.ended_after, -1);
  EXPECT_LT(counted.ops, runner.ops);
}

}  // namespace
}  // namespace tensord
