#include "server/autodiff/engine.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {

AttrMap ZerosAttrs(const TensorMeta& m) {
  return {{"shape", m.shape}, {"dtype", std::string(DTypeName(m.dtype))}, {"device", m.device}};
}

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

 private:
  OpRunner& runner_;
  std::map<const Node*, std::vector<Tensor>> memo_;
};

absl::Status Accumulate(Tensor& slot, Tensor grad, OpRunner& runner) {
  if (!slot.defined()) {
    slot = std::move(grad);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(slot, runner.Run1(opname::add, {slot, std::move(grad)}));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> ReduceGradTo(const Tensor& grad, const TensorMeta& target,
                                    OpRunner& runner) {
  Tensor g = grad;
  if (g.shape() != target.shape) {
    // Sum leading dims the broadcast added, then dims that were 1 in the target.
    const int64_t extra = g.rank() - static_cast<int64_t>(target.shape.size());
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < g.rank(); ++d) {
      if (d < extra || (target.shape[d - extra] == 1 && g.dim(d) != 1)) dims.push_back(d);
    }
    if (!dims.empty()) {
      ASSIGN_OR_RETURN(g, runner.Run1(opname::sum, {g}, {{"dim", dims}, {"keepdim", true}}));
    }
    ASSIGN_OR_RETURN(g, runner.Run1(opname::reshape, {g}, {{"shape", target.shape}}));
  }
  if (g.dtype() != target.dtype) {
    ASSIGN_OR_RETURN(
        g, runner.Run1(opname::to_dtype, {g}, {{"dtype", std::string(DTypeName(target.dtype))}}));
  }
  return g;
}

absl::StatusOr<std::vector<LeafGradient>> RunBackward(AutodiffContext& ctx,
                                                      const std::vector<Tensor>& roots,
                                                      const std::vector<Tensor>& seeds,
                                                      bool retain_graph, OpRunner& runner) {
  std::map<const AutogradMeta*, LeafGradient> leaves;
  std::map<Node*, std::vector<Tensor>> pending;     // gradient per node output
  std::map<uint64_t, Node*, std::greater<>> order;  // seq → node, newest first

  auto add_grad = [&](const std::shared_ptr<AutogradMeta>& meta, Tensor g) -> absl::Status {
    if (meta->grad_fn) {
      auto& slots = pending[meta->grad_fn.get()];
      slots.resize(meta->grad_fn->output_types.size());
      return Accumulate(slots[meta->output_index], std::move(g), runner);
    }
    LeafGradient& lg = leaves[meta.get()];
    lg.leaf = meta;
    return Accumulate(lg.grad, std::move(g), runner);
  };

  for (size_t r = 0; r < roots.size(); ++r) {
    const Tensor& root = roots[r];
    const auto& meta = root.autograd();
    if (!meta || meta->context_id != ctx.id()) {
      return Error(Reason::kBackwardRootNotTracked,
                   absl::StrCat("autodiff: backward root ", r,
                                " is not an autodiff tensor of context ", ctx.id()),
                   {{"root_index", absl::StrCat(r)}, {"context_id", absl::StrCat(ctx.id())}});
    }
    Tensor seed = r < seeds.size() ? seeds[r] : Tensor();
    if (!seed.defined()) {
      if (root.numel() != 1) {
        return Error(
            Reason::kBackwardRootNotScalar,
            absl::StrCat("autodiff: backward root ", r, " has shape ", ShapeToString(root.shape()),
                         "; give a seed gradient or reduce it to one element"),
            {{"root_index", absl::StrCat(r)}, {"shape", ShapeToString(root.shape())}});
      }
      ASSIGN_OR_RETURN(seed, runner.Run1(opname::ones, {}, ZerosAttrs(root.meta())));
    } else if (seed.shape() != root.shape()) {
      return Error(Reason::kShapeMismatch,
                   absl::StrCat("autodiff: seed ", r, " has shape ", ShapeToString(seed.shape()),
                                " but its root has shape ", ShapeToString(root.shape())),
                   {{"root_index", absl::StrCat(r)}});
    } else if (seed.dtype() != root.dtype()) {
      ASSIGN_OR_RETURN(seed, ReduceGradTo(seed, root.meta(), runner));
    }
    RETURN_IF_ERROR(add_grad(meta, seed.Detached()));
  }

  // Every node reachable from the roots; recording order is a topological order.
  std::vector<Node*> stack;
  std::set<Node*> seen;
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

  Materializer saved(runner);
  for (auto& [seq, node] : order) {
    std::vector<Tensor>& gouts = pending[node];
    gouts.resize(node->output_types.size());
    for (size_t k = 0; k < gouts.size(); ++k) {
      if (!gouts[k].defined()) {
        ASSIGN_OR_RETURN(gouts[k],
                         runner.Run1(opname::zeros, {}, ZerosAttrs(node->output_types[k])));
      }
    }
    std::vector<bool> needs(node->input_meta.size());
    bool any = false;
    for (size_t i = 0; i < needs.size(); ++i) {
      needs[i] = node->input_meta[i] != nullptr && IsFloat(node->input_types[i].dtype);
      any |= needs[i];
    }
    if (!any) continue;
    std::vector<Tensor> grads(needs.size());
    if (node->op->marking == Marking::kZeroGrad) {
      for (size_t i = 0; i < needs.size(); ++i) {
        if (!needs[i]) continue;
        ASSIGN_OR_RETURN(grads[i],
                         runner.Run1(opname::zeros, {}, ZerosAttrs(node->input_types[i])));
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
    for (size_t i = 0; i < needs.size(); ++i) {
      if (!needs[i] || !grads[i].defined()) continue;
      ASSIGN_OR_RETURN(Tensor g, ReduceGradTo(grads[i], node->input_types[i], runner));
      RETURN_IF_ERROR(add_grad(node->input_meta[i], g.Detached()));
    }
    pending.erase(node);
  }

  std::vector<LeafGradient> out;
  for (auto& [ptr, lg] : leaves) out.push_back(std::move(lg));
  if (!retain_graph) {
    for (auto& [seq, node] : order) node->Free();
    ctx.RemoveFreed();
  }
  return out;
}

}  // namespace tensord
