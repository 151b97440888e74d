// Programs: a forward batch template whose operands may be parameters, an optional backward
// (roots → gradients of chosen leaves) and no_grad updates that may take those gradients,
// compiled once and run in one round trip. Compiling runs the program once on the example
// inputs and undoes it: every call's output dtype and shape is known afterwards, and every
// error a run would meet on inputs of those types (an unmarked op on the differentiated path,
// a shape mismatch, an unreachable leaf) is met at compile time, naming the call. No gRPC or
// protobuf types: the RPC layer converts its request into a ProgramSpec first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/autodiff/backward_plan.h"
#include "server/autodiff/recording_plan.h"
#include "server/dispatch/call_sequence.h"
#include "server/dispatch/dispatcher.h"
#include "server/dispatch/gradient_reduction.h"
#include "server/service/execute.h"
#include "server/service/program_memory_plan.h"
#include "server/service/session.h"

namespace tensord {

// Parameter names only label errors and listings; a longer one is INVALID_REQUEST, so that
// every error quoting it stays small.
inline constexpr size_t kMaxParameterNameBytes = 128;

struct ParameterSpec {
  std::string name;     // for errors and listings
  OperandSpec example;  // a handle, literal or scalar: fixes what runs bind
};

struct ProgramSpec {
  std::vector<ParameterSpec> parameters;
  std::vector<CallSpec> calls;    // the forward; call outputs count these from 0
  std::vector<CallSpec> updates;  // without recording, after the backward; numbered after calls
  uint64_t context_id = 0;        // the context the forward records on; 0 = none
  bool no_grad = false;           // the forward records nothing
  bool backward = false;
  std::vector<OperandSpec::CallOutput> roots;  // forward outputs
  std::vector<uint64_t> leaves;                // requires-grad leaf handles of the context
  bool fetch_gradients = false;
  // Leaves (of `leaves`) whose gradients the backward reduces across the process group.
  GradientReductionSpec reduction;
  // Compiled (program_memory_plan.h): per call, the calls whose outputs a run drops after it.
  std::vector<std::vector<uint32_t>> releases;
  // Owns the bytes the literals of the calls point into, for as long as the program lives.
  std::shared_ptr<const void> owner;
};

// What a parameter binds: a tensor of one dtype and shape, or a number of one kind.
struct ParameterType {
  bool number = false;
  size_t number_kind = 0;  // index in OperandSpec::Scalar: double, int64_t, bool
  DType dtype = DType::kF32;
  Shape shape;
};

// The backward of a program's runs, planned from its trial run: the gradient calls in order
// (backward_plan.h) and the nodes its forward records, into nodes the program keeps
// (recording_plan.h). A run that records what was planned runs the plan over its nodes; one
// that records anything else records on the tape, and its backward walks its own graph.
struct CompiledBackward {
  std::shared_ptr<const BackwardPlan> plan;        // null without a backward
  std::shared_ptr<const RecordingPlan> recording;  // null: runs record on the tape
  std::vector<std::shared_ptr<Node>> nodes;        // per recording entry, reused by every run
};

// What a program's runs decided, kept for the next run.
struct RunPlans {
  std::vector<CallPlan> calls;  // per call (forward, then updates)
  // The calls made by op name inside those calls (a composite's parts) and by the backward.
  CallSequence by_name;
};

struct Program {
  ProgramSpec spec;
  std::vector<ParameterType> parameters;
  // Per call (forward, then updates): its outputs as compiled (handle-less tensors' metadata).
  std::vector<std::vector<TensorMeta>> outputs;
  uint64_t runs = 0;    // runs that committed
  int fused_calls = 0;  // calls that run fused ops (each with the calls folded into it)
  // The most bytes the trial run held above what the session held before it, sampled after
  // each call and after each op of the backward (program_memory_plan.h).
  int64_t peak_bytes = 0;
  // What the last run decided of each call (CallPlan), so that a run validates no attributes
  // and plans no kernel a run before it planned, and finds no op by name.
  RunPlans plans;
  // The backward, planned from the trial run's graph.
  CompiledBackward backward;
  // The program as written, when fusion rewrote it: a fused run that fails runs again as
  // written, so that its failure is the one the calls themselves report.
  std::unique_ptr<ProgramSpec> unfused;
  RunPlans unfused_plans;
  // Of the session's quota (program_memory_plan.h): the stored request (calls, attributes,
  // literals), held for as long as the program lives, and a run's peak.
  QuotaHold stored_hold;
  QuotaHold peak_hold;
};

// Charges `program`'s stored request to `account`, all or nothing: QUOTA_EXCEEDED when the
// session cannot hold it. Not a tensor, so the per-tensor maximum does not apply.
absl::Status ChargeProgram(Program& program, const std::shared_ptr<MemoryAccount>& account,
                           int64_t bytes);

struct ProgramOutcome {
  std::vector<CallOutcome> calls;  // forward, then updates; only kept and fetched outputs
  std::vector<Tensor> gradients;   // one per leaf when the backward fetches them
  std::vector<std::string> gradient_bytes;
  bool backward_planned = false;  // the backward ran from the program's plan
};

// Validates `spec` against `session` (whose lock the caller holds) and runs it once on the
// examples, undoing everything. LIMIT_EXCEEDED max_calls_per_program; INVALID_REQUEST for a
// backward without a context or roots; AUTODIFF_CONTEXT_NOT_ENABLED for a closed context;
// BAD_OPERAND for a leaf that is not a requires-grad leaf of the context or is not reached;
// any error of the trial run, with call_index (or phase=backward).
// With `fuse`, products and the post-ops after them become fused calls (program_fusion.h),
// checked by a second trial run; a fused form that fails it is dropped for the unfused one.
absl::StatusOr<std::shared_ptr<Program>> CompileProgram(
    Session& session, const Dispatcher& dispatcher, ProgramSpec spec,
    const std::function<bool()>& cancelled, const ExecuteLimits& limits, bool fuse = true);

// Binds `inputs` (one per parameter, of its kind, dtype and shape) and runs the program:
// atomic as ExecuteBatch. A run that had a backward frees the graph its forward recorded.
absl::StatusOr<ProgramOutcome> RunProgram(Session& session, const Dispatcher& dispatcher,
                                          Program& program, const std::vector<OperandSpec>& inputs,
                                          const std::function<bool()>& cancelled,
                                          const ExecuteLimits& limits,
                                          const CallObserver& observe = {});

}  // namespace tensord
