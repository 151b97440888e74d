// What a compiled program's forward records, decided once. Its calls are fixed, and so are its
// parameters' dtypes and shapes: run after run its forward records the same nodes, in the same
// order, joined the same way. Planned from the trial run, that recording needs no tape: a run's
// k-th node on the program's context is written into the node the program keeps for entry k
// (the same objects every run), checked against the plan as it comes (op, and where each input
// comes from: which planned node's output, which leaf, or no autodiff tensor), and the backward
// plan then runs over those nodes as they are, without searching the graph for them.
// A run that records anything else (a parameter bound to a tensor of another autodiff
// identity) goes on recording on the tape from there, and its backward walks its graph.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "server/autodiff/backward_plan.h"
#include "server/autodiff/tape.h"

namespace tensord {

struct RecordingPlan {
  struct Entry {
    const OpDef* op = nullptr;
    size_t inputs = 0;
    size_t outputs = 0;
    int step = -1;  // its step in the backward plan; -1 where the backward does not reach it
  };
  std::vector<Entry> entries;   // in recording order
  std::vector<int> step_entry;  // per backward plan step: its entry
};

// The recording of a trial run: `recorded` are the nodes its forward put on the context's tape,
// oldest first, and `graph` what PlanBackward found for `plan` from its roots. Nullopt where the
// plan reaches a node recorded before the forward (a non-leaf autodiff tensor of an earlier
// batch used as an operand): such a program's runs record on the tape.
std::optional<RecordingPlan> PlanRecording(const BackwardPlan& plan, const BackwardGraph& graph,
                                           absl::Span<const std::shared_ptr<Node>> recorded);

// One run's recording into the nodes a program keeps (one per entry, reused by every run;
// `nodes` is resized to fit). Records on other contexts go to their tapes as always.
class PlannedRecorder final : public NodeRecorder {
 public:
  PlannedRecorder(const BackwardPlan& plan, const RecordingPlan& recording,
                  std::vector<std::shared_ptr<Node>>& nodes);
  // Frees what the run's nodes saved and their links: the run's graph lives as long as it.
  ~PlannedRecorder() override;
  PlannedRecorder(const PlannedRecorder&) = delete;
  PlannedRecorder& operator=(const PlannedRecorder&) = delete;

  uint64_t context_id() const override { return plan_.context_id; }
  void Record(AutodiffContext& ctx, const OpDef& op, const Attrs& attrs,
              absl::Span<const Tensor> inputs, absl::Span<const Tensor> promoted,
              std::vector<Tensor>& outputs) override;

  // After the forward: the plan's graph, bound to this run's nodes and leaves, when the run
  // recorded what the plan expects and `roots` are the plan's roots. False otherwise: the run
  // recorded something else, and its backward walks the graph from its roots.
  bool Graph(const std::vector<Tensor>& roots, BackwardGraph& graph);
  // Whether every node so far went where the plan expects.
  bool on_plan() const { return on_plan_; }

 private:
  // Whether `m` (an input's autodiff identity) is what `target` names in this run, binding a
  // leaf the first time it is seen.
  bool Bind(const BackwardPlan::Target& target, const std::shared_ptr<AutogradMeta>& m);
  bool Matches(const RecordingPlan::Entry& entry, const OpDef& op, absl::Span<const Tensor> inputs,
               const std::vector<Tensor>& outputs);

  const BackwardPlan& plan_;
  const RecordingPlan& recording_;
  std::vector<std::shared_ptr<Node>>& nodes_;
  size_t next_ = 0;  // the entry the next record fills
  bool on_plan_ = true;
  std::vector<std::shared_ptr<AutogradMeta>> leaves_;  // per plan leaf, once bound
};

}  // namespace tensord
