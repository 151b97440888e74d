// Routes op calls to a backend and enforces the autodiff rules. It owns no tensors, sessions
// or contexts: the caller passes what a call may see in a CallEnv.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/autodiff/engine.h"
#include "server/autodiff/tape.h"
#include "server/backends/backend.h"
#include "server/distributed/process_group.h"
#include "server/ops/registry.h"

namespace tensord {

// What one call may see and do.
class CallSequence;

struct CallEnv {
  std::shared_ptr<MemoryAccount> account;  // session memory; null = unaccounted
  std::string device = kHostDevice;        // where creation ops put their output
  bool no_grad = false;                    // compute without recording
  bool autodiff_enabled = true;            // false for sessions created without autodiff
  // Looks up an autodiff context of the caller's session; null when it never existed.
  std::function<AutodiffContext*(uint64_t)> contexts;
  // Checked between calls of a batch and between backward nodes.
  std::function<bool()> cancelled;
  // The process group the session joined (null: none); collective ops run through it.
  std::shared_ptr<distributed::ProcessGroup> group;
  // Agreed on by the ranks with a collective's attributes (CollectiveCall::tag).
  std::string collective_tag;
  // The plans of the calls made by op name in this run, kept across runs (a compiled program's;
  // call_sequence.h); null: each such call is looked up and planned anew.
  CallSequence* sequence = nullptr;
  // Takes the nodes of calls on its context's autodiff tensors instead of the context's tape
  // (a compiled program's run, recording_plan.h); null: every call records on the tape.
  NodeRecorder* recorder = nullptr;
};

// What a call decided the last time it ran, kept by a caller that runs the same call again
// (a compiled program keeps one per call): its validated attributes, and for inputs of the
// same dtypes, shapes and devices its outputs' types, backend and kernel. Such a run skips
// attribute validation, the shape rule and kernel planning; anything else runs as planned.
struct CallPlan {
  bool has_attrs = false;
  Attrs attrs;
  bool has_kernel = false;
  std::vector<TensorMeta> inputs;  // after promotion
  std::vector<TensorMeta> outputs;
  Backend* backend = nullptr;
  KernelPlan kernel;
  KernelMemo memo;
  // Per input: a number operand (the same tensor at every run: a program keeps it) and what
  // promotion made of it.
  struct Cast {
    std::shared_ptr<Storage> from;
    Tensor to;
  };
  std::vector<Cast> casts;
};

class Dispatcher {
 public:
  Dispatcher(const OpRegistry& registry, std::vector<std::unique_ptr<Backend>> backends);

  // Validates the call (op, arity, attributes, dtypes, shapes, devices), enforces the autodiff
  // rules, runs the kernel or composite and records onto the inputs' context. By name (the ops
  // of backward rules and composites): first the cancellation check, then the registry.
  absl::StatusOr<std::vector<Tensor>> Call(const std::string& op, std::vector<Tensor> inputs,
                                           const AttrMap& attrs, const CallEnv& env) const;
  // The same for an op the caller resolved and checked cancellation for (the service, once
  // per call of a batch or program).
  absl::StatusOr<std::vector<Tensor>> Call(const OpDef& op, std::vector<Tensor> inputs,
                                           const AttrMap& attrs, const CallEnv& env) const;
  // The same, reusing and filling `plan` (the same op and attributes every time).
  absl::StatusOr<std::vector<Tensor>> Call(const OpDef& op, std::vector<Tensor> inputs,
                                           const AttrMap& attrs, const CallEnv& env,
                                           CallPlan* plan) const;

  // Reverse pass over `ctx` (which must be open), see RunBackward.
  absl::StatusOr<std::vector<LeafGradient>> Backward(AutodiffContext& ctx,
                                                     const std::vector<Tensor>& roots,
                                                     const std::vector<Tensor>& seeds,
                                                     bool retain_graph, const CallEnv& env,
                                                     LeafGradientSink* sink = nullptr) const;

  // NOT_FOUND (DEVICE_NOT_FOUND) for a device this server does not have.
  absl::StatusOr<Backend*> BackendFor(const std::string& device) const;
  std::vector<DeviceInfo> Devices() const;
  // Backend kinds with a kernel (or, for composites, all constituents) for `op`.
  std::vector<std::string> BackendsFor(const OpDef& op) const;
  const OpRegistry& registry() const { return registry_; }

  // Host bytes → tensor on `device`, charged to `account`.
  absl::StatusOr<Tensor> FromHost(DType dtype, Shape shape, const std::string& device,
                                  const void* data, size_t bytes,
                                  std::shared_ptr<MemoryAccount> account) const;
  absl::Status ToHost(const Tensor& t, void* dst) const;

 private:
  absl::Status CheckAutodiff(const OpDef& def, const std::vector<Tensor>& inputs,
                             const CallEnv& env) const;
  // A collective op (collective_call.cc): checked here, then run by the session's group,
  // which meets its peers even when this rank refuses the call, so every rank fails alike.
  absl::StatusOr<std::vector<Tensor>> CallCollective(const OpDef& def, std::vector<Tensor> inputs,
                                                     const AttrMap& attr_map,
                                                     const CallEnv& env) const;
  // WRONG_ARITY unless `n` inputs fit the op.
  static absl::Status CheckArity(const OpDef& def, int n);
  // Records a call onto the context of its autodiff inputs (gives the outputs their identity).
  void RecordOnContext(const OpDef& def, const Attrs& attrs, const std::vector<Tensor>& inputs,
                       const std::vector<Tensor>& promoted, std::vector<Tensor>& outputs,
                       const CallEnv& env) const;

  const OpRegistry& registry_;
  std::vector<std::unique_ptr<Backend>> backends_;
  // Backends serve a fixed set of devices, read once here: every routed call looks its device
  // up, and asking the backends each time rebuilt their device lists.
  std::vector<DeviceInfo> devices_;
  std::vector<Backend*> device_backends_;  // parallel to devices_
};

// An OpRunner bound to a dispatcher and an environment (for backward rules and composites).
class DispatchRunner : public OpRunner {
 public:
  DispatchRunner(const Dispatcher& dispatcher, CallEnv env)
      : dispatcher_(dispatcher), env_(std::move(env)) {}
  absl::StatusOr<std::vector<Tensor>> Run(const std::string& op, std::vector<Tensor> inputs,
                                          AttrMap attrs) override {
    return dispatcher_.Call(op, std::move(inputs), attrs, env_);
  }

 private:
  const Dispatcher& dispatcher_;
  CallEnv env_;
};

// PyTorch's result_type over tensors: dimensioned tensors outrank 0-d tensors, which outrank
// wrapped scalars, unless a weaker group is of a higher category (bool < int < float).
DType ResultType(absl::Span<const Tensor> tensors);
// The dtype arithmetic on Python numbers alone computes in: the widest of theirs (f64 for a
// float, i64 for an int), not the default dtype a number takes beside a tensor.
DType NumbersType(absl::Span<const Tensor> numbers);

}  // namespace tensord
