#include "server/autodiff/recording_plan.h"

#include <algorithm>
#include <map>

namespace tensord {

std::optional<RecordingPlan> PlanRecording(const BackwardPlan& plan, const BackwardGraph& graph,
                                           absl::Span<const std::shared_ptr<Node>> recorded) {
  std::map<const Node*, int> step_of;
  for (size_t i = 0; i < graph.nodes.size(); ++i) step_of[graph.nodes[i]] = static_cast<int>(i);
  RecordingPlan recording;
  recording.step_entry.assign(plan.steps.size(), -1);
  for (const std::shared_ptr<Node>& node : recorded) {
    RecordingPlan::Entry& entry = recording.entries.emplace_back();
    entry.op = node->op;
    entry.inputs = node->input_meta.size();
    entry.outputs = node->output_types.size();
    auto it = step_of.find(node.get());
    if (it == step_of.end()) continue;
    entry.step = it->second;
    recording.step_entry[it->second] = static_cast<int>(recording.entries.size() - 1);
  }
  const bool all_recorded = std::none_of(recording.step_entry.begin(), recording.step_entry.end(),
                                         [](int e) { return e < 0; });
  if (!all_recorded) return std::nullopt;
  return recording;
}

PlannedRecorder::PlannedRecorder(const BackwardPlan& plan, const RecordingPlan& recording,
                                 std::vector<std::shared_ptr<Node>>& nodes)
    : plan_(plan), recording_(recording), nodes_(nodes), leaves_(plan.leaf_ids.size()) {
  nodes_.resize(recording_.entries.size());
  // A node still held from outside (a tensor of an earlier run kept its identity) is left to
  // its holder; this run writes into a new one.
  for (std::shared_ptr<Node>& node : nodes_) {
    if (node == nullptr || node.use_count() > 1) node = std::make_shared<Node>();
  }
}

PlannedRecorder::~PlannedRecorder() {
  for (size_t e = 0; e < next_ && e < nodes_.size(); ++e) {
    nodes_[e]->Free();
    nodes_[e]->input_meta.clear();
  }
}

bool PlannedRecorder::Bind(const BackwardPlan::Target& target,
                           const std::shared_ptr<AutogradMeta>& m) {
  if (target.node < 0 && target.leaf < 0) return m == nullptr;
  if (m == nullptr || m->context_id != plan_.context_id) return false;
  if (target.node >= 0) {
    // An output of a node this run recorded on the plan (entries fill in recording order).
    const int e = recording_.step_entry[target.node];
    return m->grad_fn != nullptr && static_cast<size_t>(e) < next_ && m->grad_fn == nodes_[e] &&
           m->output_index == target.output;
  }
  return BindLeaf(plan_, target.leaf, m, leaves_[target.leaf]);
}

bool PlannedRecorder::Matches(const RecordingPlan::Entry& entry, const OpDef& op,
                              absl::Span<const Tensor> inputs, const std::vector<Tensor>& outputs) {
  if (entry.op != &op || entry.inputs != inputs.size() || entry.outputs != outputs.size()) {
    return false;
  }
  if (entry.step < 0) return true;  // the backward does not read it
  const BackwardPlan::Step& step = plan_.steps[entry.step];
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::shared_ptr<AutogradMeta>& m = inputs[k].autograd();
    if ((m != nullptr && IsFloat(inputs[k].dtype())) != step.needs[k]) return false;
    if (!Bind(step.targets[k], m)) return false;
  }
  return true;
}

void PlannedRecorder::Record(AutodiffContext& ctx, const OpDef& op, const Attrs& attrs,
                             absl::Span<const Tensor> inputs, absl::Span<const Tensor> promoted,
                             std::vector<Tensor>& outputs) {
  on_plan_ = on_plan_ && next_ < recording_.entries.size() &&
             Matches(recording_.entries[next_], op, inputs, outputs);
  if (!on_plan_) {
    ctx.Record(op, attrs, inputs, promoted, outputs);
    return;
  }
  ctx.RecordInto(nodes_[next_], op, attrs, inputs, promoted, outputs);
  ++next_;
}

bool PlannedRecorder::Graph(const std::vector<Tensor>& roots, BackwardGraph& graph) {
  if (!on_plan_ || next_ != recording_.entries.size() || roots.size() != plan_.roots.size()) {
    return false;
  }
  for (size_t r = 0; r < roots.size(); ++r) {
    if (!Bind(plan_.roots[r], roots[r].autograd())) return false;
  }
  graph.nodes.clear();
  for (int e : recording_.step_entry) graph.nodes.push_back(nodes_[e].get());
  if (!DistinctLeaves(leaves_)) return false;
  graph.leaves = leaves_;
  return true;
}

}  // namespace tensord
