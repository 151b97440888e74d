// A small training step recorded on an autodiff context, for the tests of backward plans and
// of planned recordings: every kind of edge a plan holds, and the walk's gradients to compare.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "server/autodiff/engine.h"
#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {

using testing::AllClose;
using testing::Random;
using testing::TestDispatcher;
using testing::Values;

constexpr uint64_t kContext = 7;

// The leaves of a small step, requires-grad leaves of the test's context.
struct Leaves {
  Tensor w, b, u;
  Tensor w_again;  // defined: the second product uses it instead of w
};

class RecordedStepTest : public ::testing::Test {
 protected:
  RecordedStepTest() : ctx_(kContext, Checkpointing::kNone) {
    env_.contexts = [this](uint64_t id) { return id == kContext ? &ctx_ : nullptr; };
    plain_ = env_;
    plain_.no_grad = true;
  }

  Tensor Leaf(Shape shape, uint32_t seed, uint64_t id) {
    Tensor t = Random(DType::kF64, std::move(shape), seed);
    t.set_autograd(MakeLeafMeta(kContext, id));
    return t;
  }
  Leaves MakeLeaves() { return {Leaf({3, 3}, 1, 11), Leaf({3}, 2, 12), Leaf({3}, 3, 13)}; }

  std::vector<Tensor> Call(const std::string& op, std::vector<Tensor> inputs, AttrMap attrs = {}) {
    auto outs = TestDispatcher().Call(op, std::move(inputs), attrs, env_);
    EXPECT_TRUE(outs.ok()) << op << ": " << outs.status();
    return outs.ok() ? *outs : std::vector<Tensor>{};
  }
  Tensor Call1(const std::string& op, std::vector<Tensor> inputs, AttrMap attrs = {}) {
    std::vector<Tensor> outs = Call(op, std::move(inputs), std::move(attrs));
    return outs.empty() ? Tensor() : outs[0];
  }

  // Records one step on the context and returns its loss. Every kind of edge a plan holds:
  // a broadcast input (b), a leaf used twice (w), a node whose two inputs are one tensor (the
  // square), a composite (cross_entropy) with an integer input, and a node with an output
  // no gradient reaches (the second chunk). `extra` puts a relu after the square.
  Tensor RecordStep(const Leaves& p, uint32_t seed, bool extra = false) {
    Tensor x = Random(DType::kF64, {4, 3}, seed);
    Tensor target = Values(DType::kI64, {4}, {static_cast<double>(seed % 3), 1, 2, 0});
    Tensor r = Call1("tanh", {Call1("add", {Call1("matmul", {x, p.w}), p.b})});
    Tensor s = Call1("mul", {r, r});
    if (extra) s = Call1("relu", {s});
    Tensor c = Call1("add", {Call1("matmul", {s, p.w_again.defined() ? p.w_again : p.w}), p.u});
    Tensor loss = Call1("cross_entropy", {c, target});
    std::vector<Tensor> halves = Call("chunk", {c}, {{"chunks", int64_t{2}}, {"dim", int64_t{0}}});
    return Call1("add", {loss, Call1("sum", {halves.at(0)})});
  }

  // The walk's gradients, by leaf tensor id, keeping the graph.
  std::map<uint64_t, Tensor> Walk(const Tensor& root) {
    DispatchRunner runner(TestDispatcher(), plain_);
    auto grads = RunBackward(ctx_, {root}, {}, /*retain_graph=*/true, runner);
    EXPECT_TRUE(grads.ok()) << grads.status();
    std::map<uint64_t, Tensor> out;
    if (grads.ok()) {
      for (const LeafGradient& g : *grads) out[g.leaf->tensor_id] = g.grad;
    }
    return out;
  }

  AutodiffContext ctx_;
  CallEnv env_, plain_;
};

}  // namespace tensord
