// Autodiff contexts and their tapes. A context records every op applied to its autodiff
// tensors (one Node per op); backward walks the nodes in reverse recording order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "server/core/tensor.h"
#include "server/ops/op_def.h"

namespace tensord {

enum class Checkpointing { kNone, kBalanced };
enum class ContextState { kOpen, kClosed };
const char* ContextStateName(ContextState s);  // "open", "closed"

struct Node;
class AutodiffContext;

// Attached to every autodiff tensor (core's Tensor carries the pointer).
struct AutogradMeta {
  uint64_t context_id = 0;
  std::shared_ptr<Node> grad_fn;  // null for a requires-grad leaf
  int output_index = 0;
  uint64_t tensor_id = 0;  // session handle once stored; 0 for batch intermediates
};

// A value a backward rule needs: kept, or recomputed from the node that produced it.
struct SavedValue {
  Tensor value;                    // defined when kept
  uint64_t version = 0;            // storage version at save time (in-place writes bump it)
  std::shared_ptr<Node> producer;  // set when recomputed
  int output_index = 0;
};

struct Node {
  uint64_t seq = 0;  // recording order within the context: a topological order
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<SavedValue> inputs;
  std::vector<SavedValue> outputs;  // empty when recomputed (BALANCED, memory-bound op)
  std::vector<std::shared_ptr<AutogradMeta>> input_meta;  // null for non-autodiff inputs
  std::vector<TensorMeta> input_types;  // dtype/shape the caller passed (before promotion)
  std::vector<TensorMeta> output_types;
  bool freed = false;  // consumed by a backward without retain_graph

  void Free();
};

// Takes the nodes of the calls made on autodiff tensors of one context, in place of its tape
// (CallEnv::recorder): the dispatcher hands it every call it would record on that context.
class NodeRecorder {
 public:
  virtual ~NodeRecorder() = default;
  virtual uint64_t context_id() const = 0;
  // Records the call, as AutodiffContext::Record would, on `ctx` (this recorder's context).
  virtual void Record(AutodiffContext& ctx, const OpDef& op, const Attrs& attrs,
                      absl::Span<const Tensor> inputs, absl::Span<const Tensor> promoted,
                      std::vector<Tensor>& outputs) = 0;
};

class AutodiffContext {
 public:
  AutodiffContext(uint64_t id, Checkpointing checkpointing)
      : id_(id), checkpointing_(checkpointing) {}

  uint64_t id() const { return id_; }
  Checkpointing checkpointing() const { return checkpointing_; }
  ContextState state() const { return state_; }

  // Records `op` applied to `inputs` (caller's tensors, `promoted` what the kernel saw) and
  // attaches autodiff identity to every float output.
  void Record(const OpDef& op, const Attrs& attrs, absl::Span<const Tensor> inputs,
              absl::Span<const Tensor> promoted, std::vector<Tensor>& outputs);
  // Records as Record does, into `node` (whatever it held before is replaced), which is not
  // put on the tape: its holder keeps it (a compiled program's run, recording_plan.h).
  void RecordInto(const std::shared_ptr<Node>& node, const OpDef& op, const Attrs& attrs,
                  absl::Span<const Tensor> inputs, absl::Span<const Tensor> promoted,
                  std::vector<Tensor>& outputs);

  // Rollback support for atomic batches.
  size_t tape_size() const { return tape_.size(); }
  // The nodes recorded after the tape had `size` of them, oldest first.
  absl::Span<const std::shared_ptr<Node>> NodesSince(size_t size) const {
    return absl::MakeConstSpan(tape_).subspan(std::min(size, tape_.size()));
  }
  void TruncateTape(size_t size);
  // Drops nodes consumed by backward.
  void RemoveFreed();
  // Bytes of distinct storages the tape keeps alive (the checkpointing figure of merit).
  int64_t SavedBytes() const;
  size_t live_nodes() const { return tape_.size(); }

  void Close();

 private:
  const uint64_t id_;
  const Checkpointing checkpointing_;
  ContextState state_ = ContextState::kOpen;
  uint64_t next_seq_ = 1;
  std::vector<std::shared_ptr<Node>> tape_;
};

// Leaf autodiff identity for a tensor put with requires_grad.
std::shared_ptr<AutogradMeta> MakeLeafMeta(uint64_t context_id, uint64_t tensor_id);

}  // namespace tensord
