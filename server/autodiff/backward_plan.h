// A backward pass decided before it runs. Planning walks the graph from the roots once: which
// nodes run, newest first, and where each input's gradient goes (an output of an older node,
// or a leaf). Running a plan makes the gradient calls in that order. RunBackward plans and runs
// at once; a compiled program plans from its trial run, and each run only checks that its
// forward recorded a graph of the same shape before it runs the plan.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/autodiff/tape.h"

namespace tensord {

struct BackwardPlan {
  // Where an input's gradient goes: output `output` of the plan's node `node`, or leaf `leaf`;
  // neither for an input that is not an autodiff tensor.
  struct Target {
    int node = -1;
    int output = 0;
    int leaf = -1;
  };
  // Node i of the plan (its position in BackwardGraph::nodes).
  struct Step {
    const OpDef* op = nullptr;    // what the node recorded
    size_t outputs = 0;           // its outputs
    std::vector<Target> targets;  // per input
    std::vector<bool> needs;      // per input: a float autodiff input gets a gradient
    bool runs = false;            // some input needs a gradient
  };
  uint64_t context_id = 0;
  std::vector<Target> roots;
  std::vector<Step> steps;         // every node the roots reach, newest first
  std::vector<uint64_t> leaf_ids;  // per leaf: its tensor id (0 for a batch intermediate)
};

// The nodes and leaves of one recorded graph, by their positions in a plan.
struct BackwardGraph {
  std::vector<Node*> nodes;
  std::vector<std::shared_ptr<AutogradMeta>> leaves;
};

// Told of each leaf's gradient as soon as no later step of the plan adds to it, so work on it
// (a reduction across servers) can start while the backward goes on. Every plan leaf is told
// once, in the order the gradients become final; a leaf none reached is told last, with an
// undefined Tensor. An error from the sink fails the backward (which then frees nothing).
class LeafGradientSink {
 public:
  virtual ~LeafGradientSink() = default;
  // Before the first step.
  virtual absl::Status Begin(const BackwardPlan& plan) = 0;
  // `leaf_id`: the plan's tensor id of the leaf (0 for a batch intermediate).
  virtual absl::Status Final(uint64_t leaf_id, const Tensor& grad) = 0;
  // After the last step and the last Final, before the backward returns.
  virtual absl::Status End() = 0;
};

// Plans the backward from `roots` (autodiff tensors of `ctx`) and fills `graph` with the nodes
// and leaves they reach; leaves are numbered in the order RunBackward reports them.
// BACKWARD_ROOT_NOT_TRACKED for a root that is not an autodiff tensor of `ctx`; GRAPH_FREED
// where a node was consumed by an earlier backward.
absl::StatusOr<BackwardPlan> PlanBackward(const AutodiffContext& ctx,
                                          const std::vector<Tensor>& roots, BackwardGraph& graph);

// Finds, from `roots`, the graph of this run that `plan` was made for, checking every edge: the
// same ops in the same order, the same leaves, the same inputs with and without autodiff
// identity. False (and `graph` unusable) where anything differs.
bool FindPlannedGraph(const BackwardPlan& plan, const std::vector<Tensor>& roots,
                      BackwardGraph& graph);

// Whether `m` (an identity without a producer, checked by the caller to be of the plan's
// context) is the plan's leaf `leaf`: its tensor id, and the identity `bound` holds once one
// was bound (binding it the first time).
bool BindLeaf(const BackwardPlan& plan, int leaf, const std::shared_ptr<AutogradMeta>& m,
              std::shared_ptr<AutogradMeta>& bound);
// Whether every leaf is bound and no two are one identity (a batch's requires-grad outputs
// share tensor id 0).
bool DistinctLeaves(const std::vector<std::shared_ptr<AutogradMeta>>& leaves);

// Runs `plan` over `graph` through `runner` (which must not record): one gradient per plan
// leaf, undefined for a leaf that none reached. `seeds[i]` may be undefined for a
// single-element root (seeded with one). `sink`, when given, is told of each leaf's gradient
// as soon as it is final. With `free_saved` each node is freed (its saved values dropped, as
// a backward without retain_graph frees it at the end) after the last step that reads them,
// so that what the forward saved goes as the pass goes; otherwise frees nothing.
absl::StatusOr<std::vector<Tensor>> RunBackwardPlan(
    const BackwardPlan& plan, const BackwardGraph& graph, const std::vector<Tensor>& roots,
    const std::vector<Tensor>& seeds, OpRunner& runner, LeafGradientSink* sink = nullptr,
    bool free_saved = false);

}  // namespace tensord
