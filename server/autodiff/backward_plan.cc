#include "server/autodiff/backward_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "server/autodiff/engine.h"
#include "server/core/status.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {

// Gives the backward rule its saved values, recomputing what BALANCED did not keep.
class Materializer {
 public:
  explicit Materializer(OpRunner& runner) : runner_(runner) {}

  absl::StatusOr<Tensor> Get(const SavedValue& v) {
    if (v.value.defined()) {
      if (v.value.storage() && v.value.storage()->version() != v.version) {
        return Error(Reason::kSavedTensorModified,
                     "autodiff: a tensor saved for backward was modified in place (assign) "
                     "after it was used; recompute the forward pass after the update",
                     {{"saved_version", absl::StrCat(v.version)},
                      {"current_version", absl::StrCat(v.value.storage()->version())}});
      }
      return v.value;
    }
    ASSIGN_OR_RETURN(const std::vector<Tensor>* outs, Outputs(*v.producer));
    return (*outs)[v.output_index];
  }

  // Outputs of `node`, kept or recomputed by re-running its forward on its saved inputs.
  absl::StatusOr<const std::vector<Tensor>*> Outputs(Node& node) {
    if (node.freed) {
      return Error(Reason::kGraphFreed,
                   absl::StrCat("autodiff: the graph through '", node.op->name,
                                "' was already freed by a backward pass; "
                                "pass retain_graph to backward twice"),
                   {{"op", node.op->name}});
    }
    auto it = memo_.find(&node);
    if (it != memo_.end()) return &it->second;
    std::vector<Tensor> outs;
    if (!node.outputs.empty()) {
      for (const SavedValue& v : node.outputs) {
        ASSIGN_OR_RETURN(Tensor t, Get(v));
        outs.push_back(std::move(t));
      }
    } else {
      std::vector<Tensor> ins;
      for (const SavedValue& v : node.inputs) {
        ASSIGN_OR_RETURN(Tensor t, Get(v));
        ins.push_back(std::move(t));
      }
      ASSIGN_OR_RETURN(outs, runner_.Run(node.op->name, std::move(ins), node.attrs.map()));
    }
    return &memo_.emplace(&node, std::move(outs)).first->second;
  }

  // Drops what Outputs(node) made or gathered: no later step reads it.
  void Forget(const Node* node) { memo_.erase(node); }

 private:
  OpRunner& runner_;
  std::map<const Node*, std::vector<Tensor>> memo_;
};

// The seed of root `r`: one for a single-element root without a seed, else the seed as the
// root's dtype.
absl::StatusOr<Tensor> Seed(const Tensor& root, const Tensor& given, size_t r, OpRunner& runner) {
  if (!given.defined()) {
    if (root.numel() != 1) {
      return Error(
          Reason::kBackwardRootNotScalar,
          absl::StrCat("autodiff: backward root ", r, " has shape ", ShapeToString(root.shape()),
                       "; give a seed gradient or reduce it to one element"),
          {{"root_index", absl::StrCat(r)}, {"shape", ShapeToString(root.shape())}});
    }
    return runner.Run1(opname::ones, {}, CreationAttrs(root.meta()));
  }
  if (given.shape() != root.shape()) {
    return Error(Reason::kShapeMismatch,
                 absl::StrCat("autodiff: seed ", r, " has shape ", ShapeToString(given.shape()),
                              " but its root has shape ", ShapeToString(root.shape())),
                 {{"root_index", absl::StrCat(r)}});
  }
  if (given.dtype() != root.dtype()) return ReduceGradTo(given, root.meta(), runner);
  return given;
}

// Per step: the nodes whose outputs no later step reads, so that what BALANCED recomputed is
// dropped there instead of being held to the end of the pass. A node's outputs are read by its
// own step and by the steps whose saved inputs it recomputes; recomputing a node reads its
// producers' outputs, so those live at least as long as it does.
// Empty where nothing is recomputed (NONE), without a lookup per node.
std::vector<std::vector<int>> ForgetAfter(const BackwardGraph& graph) {
  const int n = static_cast<int>(graph.nodes.size());
  const bool recomputes = std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const Node* node) {
    return (node->outputs.empty() && !node->output_types.empty()) ||
           std::any_of(node->inputs.begin(), node->inputs.end(),
                       [](const SavedValue& v) { return v.producer != nullptr; });
  });
  if (!recomputes) return {};
  std::map<const Node*, int> position;
  for (int i = 0; i < n; ++i) position[graph.nodes[i]] = i;
  auto producer_of = [&](const SavedValue& v) {
    if (v.value.defined() || v.producer == nullptr) return -1;
    auto it = position.find(v.producer.get());
    return it == position.end() ? -1 : it->second;
  };
  std::vector<int> last(n);
  for (int i = 0; i < n; ++i) {
    last[i] = std::max(last[i], i);
    for (const SavedValue& v : graph.nodes[i]->inputs) {
      if (const int p = producer_of(v); p >= 0) last[p] = std::max(last[p], i);
    }
  }
  for (int i = 0; i < n; ++i) {  // newest first: a node before the producers it recomputes from
    for (const SavedValue& v : graph.nodes[i]->inputs) {
      if (const int p = producer_of(v); p >= 0) last[p] = std::max(last[p], last[i]);
    }
  }
  std::vector<std::vector<int>> forget(n);
  for (int p = 0; p < n; ++p) forget[last[p]].push_back(p);
  return forget;
}

// Which leaves' gradients are final when: index 0 after the roots are seeded, i + 1 after step
// i, and the last index (past the steps) for the leaves no running step reaches.
std::vector<std::vector<int>> FinishingSteps(const BackwardPlan& plan) {
  const int n = static_cast<int>(plan.steps.size());
  std::vector<int> last(plan.leaf_ids.size(), n + 1);
  for (const BackwardPlan::Target& t : plan.roots) {
    if (t.leaf >= 0) last[t.leaf] = 0;
  }
  for (int i = 0; i < n; ++i) {
    const BackwardPlan::Step& step = plan.steps[i];
    if (!step.runs) continue;
    for (size_t k = 0; k < step.targets.size(); ++k) {
      if (step.needs[k] && step.targets[k].leaf >= 0) last[step.targets[k].leaf] = i + 1;
    }
  }
  std::vector<std::vector<int>> finishes(n + 2);
  for (size_t l = 0; l < last.size(); ++l) finishes[last[l]].push_back(static_cast<int>(l));
  return finishes;
}

absl::Status TellFinal(LeafGradientSink& sink, const BackwardPlan& plan,
                       const std::vector<int>& leaves, const std::vector<Tensor>& grads) {
  for (int l : leaves) RETURN_IF_ERROR(sink.Final(plan.leaf_ids[l], grads[l]));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BackwardPlan> PlanBackward(const AutodiffContext& ctx,
                                          const std::vector<Tensor>& roots, BackwardGraph& graph) {
  BackwardPlan plan;
  plan.context_id = ctx.id();
  graph = {};
  for (size_t r = 0; r < roots.size(); ++r) {
    const auto& meta = roots[r].autograd();
    if (!meta || meta->context_id != ctx.id()) {
      return Error(Reason::kBackwardRootNotTracked,
                   absl::StrCat("autodiff: backward root ", r,
                                " is not an autodiff tensor of context ", ctx.id()),
                   {{"root_index", absl::StrCat(r)}, {"context_id", absl::StrCat(ctx.id())}});
    }
  }

  // Every node reachable from the roots; recording order is a topological order.
  std::vector<Node*> stack;
  std::set<Node*> seen;
  std::map<uint64_t, Node*, std::greater<>> order;  // seq → node, newest first
  for (const Tensor& root : roots) {
    if (root.autograd()->grad_fn) stack.push_back(root.autograd()->grad_fn.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (n->freed) {
      return Error(Reason::kGraphFreed,
                   absl::StrCat("autodiff: the graph through '", n->op->name,
                                "' was already freed by an earlier backward; pass retain_graph "
                                "to the first backward to run it twice"),
                   {{"op", n->op->name}, {"context_id", absl::StrCat(ctx.id())}});
    }
    order[n->seq] = n;
    for (const auto& m : n->input_meta) {
      if (m && m->grad_fn) stack.push_back(m->grad_fn.get());
    }
  }
  std::map<const Node*, int> position;
  for (const auto& [seq, node] : order) {
    position[node] = static_cast<int>(graph.nodes.size());
    graph.nodes.push_back(node);
  }

  // Leaves in the order of their identity's address, the order RunBackward reports them in.
  std::map<const AutogradMeta*, std::shared_ptr<AutogradMeta>> leaves;
  auto note_leaf = [&leaves](const std::shared_ptr<AutogradMeta>& m) {
    if (m && !m->grad_fn) leaves.emplace(m.get(), m);
  };
  for (const Tensor& root : roots) note_leaf(root.autograd());
  for (const Node* node : graph.nodes) {
    for (const auto& m : node->input_meta) note_leaf(m);
  }
  std::map<const AutogradMeta*, int> leaf_index;
  for (const auto& [address, meta] : leaves) {
    leaf_index[address] = static_cast<int>(graph.leaves.size());
    graph.leaves.push_back(meta);
    plan.leaf_ids.push_back(meta->tensor_id);
  }

  auto target = [&](const std::shared_ptr<AutogradMeta>& m) {
    BackwardPlan::Target t;
    if (m == nullptr) return t;
    if (m->grad_fn) {
      t.node = position.at(m->grad_fn.get());
      t.output = m->output_index;
    } else {
      t.leaf = leaf_index.at(m.get());
    }
    return t;
  };
  for (const Tensor& root : roots) plan.roots.push_back(target(root.autograd()));
  for (const Node* node : graph.nodes) {
    BackwardPlan::Step& step = plan.steps.emplace_back();
    step.op = node->op;
    step.outputs = node->output_types.size();
    for (size_t i = 0; i < node->input_meta.size(); ++i) {
      step.targets.push_back(target(node->input_meta[i]));
      const bool needs = node->input_meta[i] != nullptr && IsFloat(node->input_types[i].dtype);
      step.needs.push_back(needs);
      step.runs |= needs;
    }
  }
  return plan;
}

bool FindPlannedGraph(const BackwardPlan& plan, const std::vector<Tensor>& roots,
                      BackwardGraph& graph) {
  graph.nodes.assign(plan.steps.size(), nullptr);
  graph.leaves.assign(plan.leaf_ids.size(), nullptr);
  // Binds the target's node or leaf to what `m` names, or checks it names what is bound.
  auto bind = [&](const BackwardPlan::Target& t, const std::shared_ptr<AutogradMeta>& m) {
    if (t.node < 0 && t.leaf < 0) return m == nullptr;
    if (m == nullptr || m->context_id != plan.context_id) return false;
    if (t.node >= 0) {
      if (m->grad_fn == nullptr || m->output_index != t.output) return false;
      Node*& bound = graph.nodes[t.node];
      if (bound == nullptr) bound = m->grad_fn.get();
      return bound == m->grad_fn.get();
    }
    return BindLeaf(plan, t.leaf, m, graph.leaves[t.leaf]);
  };
  if (roots.size() != plan.roots.size()) return false;
  for (size_t r = 0; r < roots.size(); ++r) {
    if (!bind(plan.roots[r], roots[r].autograd())) return false;
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const BackwardPlan::Step& step = plan.steps[i];
    const Node* node = graph.nodes[i];
    // Strictly older than the node before it: distinct nodes, in recording order.
    if (node == nullptr || node->freed || node->op != step.op ||
        (i > 0 && node->seq >= graph.nodes[i - 1]->seq) ||
        node->output_types.size() != step.outputs ||
        node->input_meta.size() != step.targets.size()) {
      return false;
    }
    for (size_t k = 0; k < step.targets.size(); ++k) {
      if (!bind(step.targets[k], node->input_meta[k])) return false;
      const bool needs = node->input_meta[k] != nullptr && IsFloat(node->input_types[k].dtype);
      if (needs != step.needs[k]) return false;
    }
  }
  return DistinctLeaves(graph.leaves);
}

bool BindLeaf(const BackwardPlan& plan, int leaf, const std::shared_ptr<AutogradMeta>& m,
              std::shared_ptr<AutogradMeta>& bound) {
  if (m->grad_fn != nullptr || m->tensor_id != plan.leaf_ids[leaf]) return false;
  if (bound == nullptr) bound = m;
  return bound == m;
}

bool DistinctLeaves(const std::vector<std::shared_ptr<AutogradMeta>>& leaves) {
  std::vector<const AutogradMeta*> seen;
  for (const auto& m : leaves) {
    if (m == nullptr) return false;
    seen.push_back(m.get());
  }
  std::sort(seen.begin(), seen.end());
  return std::adjacent_find(seen.begin(), seen.end()) == seen.end();
}

absl::StatusOr<std::vector<Tensor>> RunBackwardPlan(
    const BackwardPlan& plan, const BackwardGraph& graph, const std::vector<Tensor>& roots,
    const std::vector<Tensor>& seeds, OpRunner& runner, LeafGradientSink* sink, bool free_saved) {
  std::vector<std::vector<Tensor>> pending(plan.steps.size());  // gradient per node output
  std::vector<Tensor> leaf_grads(plan.leaf_ids.size());
  auto add = [&](const BackwardPlan::Target& t, Tensor g) -> absl::Status {
    if (t.node >= 0) {
      std::vector<Tensor>& slots = pending[t.node];
      slots.resize(plan.steps[t.node].outputs);
      return AccumulateGrad(slots[t.output], std::move(g), runner);
    }
    if (t.leaf >= 0) return AccumulateGrad(leaf_grads[t.leaf], std::move(g), runner);
    return absl::OkStatus();
  };
  for (size_t r = 0; r < roots.size(); ++r) {
    ASSIGN_OR_RETURN(Tensor seed,
                     Seed(roots[r], r < seeds.size() ? seeds[r] : Tensor(), r, runner));
    RETURN_IF_ERROR(add(plan.roots[r], seed.Detached()));
  }

  // Per step (and one for the roots, before them): the leaves whose gradient it finishes.
  std::vector<std::vector<int>> finishes;
  if (sink != nullptr) {
    RETURN_IF_ERROR(sink->Begin(plan));
    finishes = FinishingSteps(plan);
    RETURN_IF_ERROR(TellFinal(*sink, plan, finishes[0], leaf_grads));
  }
  Materializer saved(runner);
  const std::vector<std::vector<int>> forget = ForgetAfter(graph);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const BackwardPlan::Step& step = plan.steps[i];
    Node* node = graph.nodes[i];
    std::vector<Tensor> gouts = std::move(pending[i]);
    pending[i] = {};
    // After the step: what it was the last to read. A node's saved values are read by its own
    // step and, where BALANCED recomputes from it, by the steps that read its outputs.
    absl::Cleanup forget_read = [&] {
      if (i < forget.size()) {
        for (int p : forget[i]) {
          saved.Forget(graph.nodes[p]);
          if (free_saved) graph.nodes[p]->Free();
        }
      } else {  // nothing recomputed: only this step read this node's values
        saved.Forget(node);
        if (free_saved) node->Free();
      }
    };
    if (!step.runs) continue;
    gouts.resize(step.outputs);
    for (size_t k = 0; k < gouts.size(); ++k) {
      if (!gouts[k].defined()) {
        ASSIGN_OR_RETURN(gouts[k], ZeroGrad(node->output_types[k], runner));
      }
    }
    const std::vector<bool>& needs = step.needs;
    std::vector<Tensor> grads(needs.size());
    if (node->op->marking == Marking::kZeroGrad) {
      for (size_t k = 0; k < needs.size(); ++k) {
        if (!needs[k]) continue;
        ASSIGN_OR_RETURN(grads[k], ZeroGrad(node->input_types[k], runner));
      }
    } else {
      std::vector<Tensor> ins;
      for (const SavedValue& v : node->inputs) {
        ASSIGN_OR_RETURN(Tensor t, saved.Get(v));
        ins.push_back(std::move(t));
      }
      ASSIGN_OR_RETURN(const std::vector<Tensor>* outs, saved.Outputs(*node));
      Attrs attrs = node->attrs;
      GradContext gc{ins, *outs, gouts, attrs, needs, runner};
      auto result = node->op->backward(gc);
      if (!result.ok()) {
        return WithMetadata(result.status(), {{"backward_of", node->op->name}});
      }
      grads = std::move(*result);
      // A rule answers for every input (an undefined Tensor where it has no gradient). Padding a
      // short answer would silently give the wrong inputs no gradient.
      if (grads.size() != needs.size()) {
        return Error(Reason::kInternal,
                     absl::StrCat("autodiff: the backward rule of '", node->op->name, "' returned ",
                                  grads.size(), " gradients for ", needs.size(), " inputs"),
                     {{"op", node->op->name},
                      {"gradients", absl::StrCat(grads.size())},
                      {"inputs", absl::StrCat(needs.size())}});
      }
    }
    for (size_t k = 0; k < needs.size(); ++k) {
      if (!needs[k] || !grads[k].defined()) continue;
      ASSIGN_OR_RETURN(Tensor g, ReduceGradTo(grads[k], node->input_types[k], runner));
      RETURN_IF_ERROR(add(step.targets[k], g.Detached()));
    }
    if (sink != nullptr) RETURN_IF_ERROR(TellFinal(*sink, plan, finishes[i + 1], leaf_grads));
  }
  if (sink != nullptr) {
    RETURN_IF_ERROR(TellFinal(*sink, plan, finishes.back(), leaf_grads));
    RETURN_IF_ERROR(sink->End());
  }
  return leaf_grads;
}

}  // namespace tensord
