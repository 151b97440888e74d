// One entry of the op table: everything the dispatcher needs to validate a call, infer its
// outputs, decide what autodiff does with it, and differentiate it. Kernels live in backends.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/core/tensor.h"
#include "server/ops/attrs.h"

namespace tensord {

// The autodiff marking of OPS.md's "grad" column.
enum class Marking {
  kDifferentiable,     // d: has a backward rule
  kZeroGrad,           // z: differentiable, gradient is zero
  kNonDifferentiable,  // n: outputs are plain tensors, no error
  kUnmarked,           // none of the above: OPERATION_NOT_MARKED_FOR_AUTODIFF on autodiff input
};
const char* MarkingName(Marking m);  // "differentiable", "zero_grad", ...

// Runs ops by name. The dispatcher implements it; backward rules and composite ops use it so
// that they are written once, in terms of other ops, for every backend.
class OpRunner {
 public:
  virtual ~OpRunner() = default;
  virtual absl::StatusOr<std::vector<Tensor>> Run(const std::string& op, std::vector<Tensor> inputs,
                                                  AttrMap attrs = {}) = 0;
  // Single-output convenience.
  absl::StatusOr<Tensor> Run1(const std::string& op, std::vector<Tensor> inputs,
                              AttrMap attrs = {});
};

// Output metadata. A dimension of -1 means "data-dependent": the kernel allocates that output.
using InferFn = std::function<absl::StatusOr<std::vector<TensorMeta>>(
    absl::Span<const TensorMeta> inputs, const Attrs& attrs)>;

struct GradContext {
  absl::Span<const Tensor> inputs;        // as the forward saw them (after promotion)
  absl::Span<const Tensor> outputs;       // forward outputs
  absl::Span<const Tensor> grad_outputs;  // one per output; zeros where nothing flowed
  const Attrs& attrs;
  std::vector<bool> needs_input_grad;  // compute only these; others may stay undefined
  OpRunner& run;                       // runs ops without recording
};
// Returns one gradient per input (undefined Tensor = none). The engine sums a gradient over
// broadcast dims and casts it back to the input's dtype, so rules need not do either.
using BackwardFn = std::function<absl::StatusOr<std::vector<Tensor>>(const GradContext&)>;

// An op implemented by calling other ops. Under autodiff its constituents are recorded, so
// it is differentiable without a rule of its own.
using CompositeFn = std::function<absl::StatusOr<std::vector<Tensor>>(
    OpRunner& run, absl::Span<const Tensor> inputs, const Attrs& attrs)>;

inline constexpr int kVariadic = -1;

// Collectives run across the ranks of the session's process group (server/distributed): the
// dispatcher hands them to the group, never to a backend kernel.
enum class CollectiveKind {
  kNone,
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kBarrier
};
// A collective's outputs depend on the number of ranks (all_gather's first dimension).
using CollectiveInferFn = std::function<absl::StatusOr<std::vector<TensorMeta>>(
    absl::Span<const TensorMeta> inputs, const Attrs& attrs, int world_size)>;

// OpDef::id of an op that is not in the built-in catalog (a plugin's op, a test's registry).
inline constexpr int kNotBuiltin = -1;

struct OpDef {
  std::string name;
  // The op's index in the built-in catalog (OpRegistry::Builtin() numbers its ops 0..n-1 by
  // name, and copies keep the number): backends key their kernel tables by it, so no kernel is
  // found by comparing names. kNotBuiltin for every other op.
  int id = kNotBuiltin;
  std::string category;  // "elementwise", "reduction", ... (ListOps and docs)
  int min_inputs = 1;
  int max_inputs = 1;  // kVariadic: any number >= min_inputs
  std::vector<std::string> input_names;
  std::vector<AttrSpec> attrs;
  DTypeSet dtypes;  // dtypes of the primary (first float/int) operand the op accepts
  Marking marking = Marking::kUnmarked;
  InferFn infer;
  BackwardFn backward;    // required for kDifferentiable unless `composite` is set
  CompositeFn composite;  // when set, the op has no kernel of its own
  // A form of a kernel op that other ops express: calls whose attributes
  // `composite_form_when` accepts run `composite_form` (recorded like a composite) instead of
  // the kernel. conv2d's padding='same' pads the input on its far side first where PyTorch
  // pads asymmetrically, then runs the symmetric convolution, as PyTorch does.
  std::function<bool(const Attrs&)> composite_form_when;
  CompositeFn composite_form;
  // Tensor inputs from this index on are cast to their PyTorch result type before the kernel
  // (binary arithmetic, where). -1: no promotion.
  int promote_from = -1;
  // True division and the float binary functions (PyTorch's promote_integer_inputs_to_float):
  // where it says yes for the call's attributes and the operands' common dtype is an integer or
  // bool, each operand is cast straight to f32 instead of through that common dtype, which
  // could wrap a 0-d operand first (i8 [-100] / 0-d u8 168 divides by 168, not by -88).
  std::function<bool(const Attrs&)> integers_to_float;
  // BALANCED checkpointing keeps the inputs of compute-bound ops and recomputes the others.
  bool compute_bound = false;
  // Writes into its first input (assign). Refused on autodiff tensors while recording.
  bool in_place = false;
  // Inputs the op writes into besides computing its outputs (batch_norm's running statistics,
  // through `assign`). Unlike in_place, autodiff inputs are allowed; the service saves these
  // targets so that a failing batch restores them.
  std::vector<int> mutates_inputs;
  // Storage dtypes are accepted wherever the op takes their compute dtype (bf16/f16 where it
  // takes f32, u8/i8/i16 where it takes i32) and computed in widened copies. Ops that write
  // their inputs in place without a kernel of their own for those dtypes set false (a copy
  // would take the writes): ListOps then lists no storage dtype for them.
  bool widen_storage_dtypes = true;
  // The kernel returns a view of its input (shared storage): no output is pre-allocated.
  bool view = false;
  // Copies its input to the device its `device` attribute names (to_device). The dispatcher
  // runs it itself with the two backends' copies, so no backend has a kernel for it and it
  // runs between any two devices.
  bool device_move = false;
  // A collective (server/ops/distributed_collectives.cc) and its shape rule, which replaces
  // `infer`.
  CollectiveKind collective = CollectiveKind::kNone;
  CollectiveInferFn collective_infer;
  // Creation ops take no tensor inputs and produce their output on the session device.
  bool creation = false;
  // A helper op used by backward rules (e.g. max_pool2d_backward): not in ListOps, not in
  // the catalog, refused from clients.
  bool internal = false;
  std::string origin = "builtin";
  std::string doc;
};

}  // namespace tensord
