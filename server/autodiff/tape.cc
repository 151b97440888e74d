#include "server/autodiff/tape.h"

#include <set>

namespace tensord {

const char* ContextStateName(ContextState s) {
  return s == ContextState::kOpen ? "open" : "closed";
}

void Node::Free() {
  freed = true;
  inputs.clear();
  outputs.clear();
}

std::shared_ptr<AutogradMeta> MakeLeafMeta(uint64_t context_id, uint64_t tensor_id) {
  auto meta = std::make_shared<AutogradMeta>();
  meta->context_id = context_id;
  meta->tensor_id = tensor_id;
  return meta;
}

namespace {

SavedValue Keep(const Tensor& t) {
  SavedValue v;
  v.value = t.Detached();
  v.version = t.storage() ? t.storage()->version() : 0;
  return v;
}

}  // namespace

void AutodiffContext::Record(const OpDef& op, const Attrs& attrs, absl::Span<const Tensor> inputs,
                             absl::Span<const Tensor> promoted, std::vector<Tensor>& outputs) {
  auto node = std::make_shared<Node>();
  RecordInto(node, op, attrs, inputs, promoted, outputs);
  tape_.push_back(std::move(node));
}

void AutodiffContext::RecordInto(const std::shared_ptr<Node>& node, const OpDef& op,
                                 const Attrs& attrs, absl::Span<const Tensor> inputs,
                                 absl::Span<const Tensor> promoted, std::vector<Tensor>& outputs) {
  node->seq = next_seq_++;
  node->op = &op;
  node->attrs = attrs;
  node->freed = false;
  node->inputs.clear();
  node->outputs.clear();
  node->input_meta.clear();
  node->input_types.clear();
  node->output_types.clear();
  const bool recompute_self = checkpointing_ == Checkpointing::kBalanced && !op.compute_bound;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& meta = inputs[i].autograd();
    node->input_meta.push_back(meta);
    node->input_types.push_back(inputs[i].meta());
    // BALANCED: an input produced by another memory-bound node is recomputed from that node
    // instead of kept; outputs of compute-bound ops and leaves are kept.
    const bool recompute_input = recompute_self && meta && meta->grad_fn &&
                                 !meta->grad_fn->op->compute_bound &&
                                 promoted[i].dtype() == inputs[i].dtype();
    if (recompute_input) {
      SavedValue v;
      v.producer = meta->grad_fn;
      v.output_index = meta->output_index;
      node->inputs.push_back(std::move(v));
    } else {
      node->inputs.push_back(Keep(promoted[i]));
    }
  }
  for (const Tensor& out : outputs) {
    node->output_types.push_back(out.meta());
    if (!recompute_self) node->outputs.push_back(Keep(out));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!IsFloat(outputs[k].dtype())) continue;
    auto meta = std::make_shared<AutogradMeta>();
    meta->context_id = id_;
    meta->grad_fn = node;
    meta->output_index = static_cast<int>(k);
    outputs[k].set_autograd(std::move(meta));
  }
}

void AutodiffContext::TruncateTape(size_t size) {
  while (tape_.size() > size) {
    tape_.back()->Free();
    tape_.pop_back();
  }
}

void AutodiffContext::RemoveFreed() {
  std::vector<std::shared_ptr<Node>> kept;
  for (auto& n : tape_) {
    if (!n->freed) kept.push_back(std::move(n));
  }
  tape_ = std::move(kept);
}

int64_t AutodiffContext::SavedBytes() const {
  std::set<const Storage*> seen;
  int64_t total = 0;
  auto add = [&](const SavedValue& v) {
    if (v.value.defined() && seen.insert(v.value.storage().get()).second) {
      total += static_cast<int64_t>(v.value.storage()->bytes());
    }
  };
  for (const auto& n : tape_) {
    for (const auto& v : n->inputs) add(v);
    for (const auto& v : n->outputs) add(v);
  }
  return total;
}

void AutodiffContext::Close() {
  state_ = ContextState::kClosed;
  TruncateTape(0);
}

}  // namespace tensord
