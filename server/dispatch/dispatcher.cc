#include "server/dispatch/dispatcher.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/core/status.h"
#include "server/dispatch/call_sequence.h"
#include "server/dispatch/device_placement.h"
#include "server/dispatch/storage_dtypes.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {

// A number operand (a 0-d tensor in host memory) converted to `dtype` on the host, element by
// element as to_dtype's kernel converts it; undefined where to_dtype must run (bf16 and f16,
// a tensor of another rank or on a device). Promoting `x + 1.0` so costs no dispatch of its own.
Tensor CastNumber(const Tensor& t, DType dtype) {
  Tensor out;
  if (t.rank() != 0 || t.storage() == nullptr || !t.storage()->on_host()) return out;
  TENSORD_DISPATCH_TYPED(t.dtype(), [&] {
    using In = T;
    const In v = *t.data<In>();
    TENSORD_DISPATCH_TYPED(dtype, [&] { out = Tensor::Scalar<T>(ConvertElement<T>(v)); });
  });
  return out;
}

// torch's combine_categories(higher, lower).
std::optional<DType> Combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (IsFloat(*higher)) return higher;
  if (IsBool(*higher) || IsFloat(*lower)) return PromoteTypes(*higher, *lower);
  return higher;
}

std::string Id(uint64_t v) { return absl::StrCat(v); }

}  // namespace

DType ResultType(absl::Span<const Tensor> tensors) {
  std::optional<DType> dim, zero, wrapped;
  for (const Tensor& t : tensors) {
    std::optional<DType>* slot = t.wrapped_number() ? &wrapped : t.rank() == 0 ? &zero : &dim;
    DType d = t.dtype();
    // A wrapped float scalar counts as the default float dtype.
    if (t.wrapped_number() && IsFloat(d)) d = DType::kF32;
    if (t.wrapped_number() && IsInt(d)) d = DType::kI64;
    *slot = *slot ? PromoteTypes(**slot, d) : d;
  }
  return Combine(dim, Combine(zero, wrapped)).value_or(DType::kF32);
}

DType NumbersType(absl::Span<const Tensor> numbers) {
  DType d = numbers[0].dtype();
  for (const Tensor& t : numbers.subspan(1)) d = PromoteTypes(d, t.dtype());
  return d;
}

Dispatcher::Dispatcher(const OpRegistry& registry, std::vector<std::unique_ptr<Backend>> backends)
    : registry_(registry), backends_(std::move(backends)) {
  for (const auto& b : backends_) {
    for (DeviceInfo& d : b->Devices()) {
      devices_.push_back(std::move(d));
      device_backends_.push_back(b.get());
    }
  }
}

absl::StatusOr<Backend*> Dispatcher::BackendFor(const std::string& device) const {
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].name == device) return device_backends_[i];
  }
  return Error(Reason::kDeviceNotFound, absl::StrCat("dispatch: no device '", device, "'"),
               {{"device", device}});
}

std::vector<DeviceInfo> Dispatcher::Devices() const { return devices_; }

std::vector<std::string> Dispatcher::BackendsFor(const OpDef& op) const {
  std::vector<std::string> out;
  for (const auto& b : backends_) {
    // Composites run wherever their constituents run; collectives on every device (the
    // tensors of a device stage through host memory).
    if (op.composite != nullptr || op.device_move || op.collective != CollectiveKind::kNone ||
        b->Implements(op)) {
      out.push_back(b->kind());
    }
  }
  return out;
}

absl::StatusOr<Tensor> Dispatcher::FromHost(DType dtype, Shape shape, const std::string& device,
                                            const void* data, size_t bytes,
                                            std::shared_ptr<MemoryAccount> account) const {
  ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape));
  if (static_cast<size_t>(n) * DTypeSize(dtype) != bytes) {
    return Error(Reason::kBadTensorData,
                 absl::StrCat("transfer: ", bytes, " bytes do not match shape ",
                              ShapeToString(shape), " of ", DTypeName(dtype), " (",
                              n * static_cast<int64_t>(DTypeSize(dtype)), " bytes)"),
                 {{"bytes", absl::StrCat(bytes)},
                  {"expected_bytes", absl::StrCat(n * static_cast<int64_t>(DTypeSize(dtype)))}});
  }
  ASSIGN_OR_RETURN(Backend * backend, BackendFor(device));
  ASSIGN_OR_RETURN(Tensor t,
                   backend->Allocate(dtype, std::move(shape), device, std::move(account)));
  RETURN_IF_ERROR(backend->CopyFromHost(data, bytes, t));
  return t;
}

absl::Status Dispatcher::ToHost(const Tensor& t, void* dst) const {
  ASSIGN_OR_RETURN(Backend * backend, BackendFor(t.device()));
  return backend->CopyToHost(t, dst);
}

absl::Status Dispatcher::CheckArity(const OpDef& def, int n) {
  if (n >= def.min_inputs && (def.max_inputs == kVariadic || n <= def.max_inputs)) {
    return absl::OkStatus();
  }
  std::string expected = def.max_inputs == kVariadic ? absl::StrCat(def.min_inputs, "+")
                         : def.min_inputs == def.max_inputs
                             ? absl::StrCat(def.min_inputs)
                             : absl::StrCat(def.min_inputs, "..", def.max_inputs);
  return Error(Reason::kWrongArity,
               absl::StrCat(def.name, ": takes ", expected, " inputs, got ", n),
               {{"op", def.name}, {"expected", expected}, {"got", absl::StrCat(n)}});
}

absl::Status Dispatcher::CheckAutodiff(const OpDef& def, const std::vector<Tensor>& inputs,
                                       const CallEnv& env) const {
  const AutogradMeta* first = nullptr;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const AutogradMeta* meta = inputs[i].autograd().get();
    if (meta == nullptr) continue;
    Metadata md = {{"op", def.name},
                   {"input_index", absl::StrCat(i)},
                   {"tensor_id", Id(meta->tensor_id)},
                   {"context_id", Id(meta->context_id)},
                   {"device", inputs[i].device()}};
    // A custom op's failure names the plugin that registered it.
    if (def.origin != "builtin") md["plugin"] = def.origin;
    AutodiffContext* ctx = env.contexts ? env.contexts(meta->context_id) : nullptr;
    std::string state = !env.autodiff_enabled ? "disabled"
                        : ctx == nullptr      ? "never_opened"
                                              : ContextStateName(ctx->state());
    // detach is the way out for a tensor whose context has gone: it is always allowed.
    if (state != "open" && def.name != "detach") {
      md["context_state"] = state;
      return Error(
          Reason::kAutodiffContextNotEnabled,
          absl::StrCat(def.name, ": input ", i, " (tensor ", meta->tensor_id,
                       ") is an autodiff tensor of context ", meta->context_id, ", which is ",
                       state, "; open a context, or detach the tensor to use its value"),
          md);
    }
    if (env.no_grad) continue;
    if (def.marking == Marking::kUnmarked || def.in_place) {
      return Error(
          Reason::kOperationNotMarkedForAutodiff,
          absl::StrCat(def.name, ": input ", i, " (tensor ", meta->tensor_id,
                       ") is an autodiff tensor of context ", meta->context_id, ", but '", def.name,
                       "'",
                       def.origin != "builtin" ? absl::StrCat(" (plugin ", def.origin, ")") : "",
                       " is not marked for autodiff (no backward rule, not marked "
                       "non-differentiable); detach the input, use a marked op",
                       def.in_place ? ", or run it in a no_grad batch" : ""),
          md);
    }
    if (first != nullptr && first->context_id != meta->context_id) {
      return Error(
          Reason::kBadOperand,
          absl::StrCat(def.name, ": inputs belong to autodiff contexts ", first->context_id,
                       " and ", meta->context_id, "; one op records onto one context"),
          md);
    }
    first = meta;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> Dispatcher::Call(const std::string& op,
                                                     std::vector<Tensor> inputs,
                                                     const AttrMap& attr_map,
                                                     const CallEnv& env) const {
  // A caller that has gone (deadline, cancel, server shutdown) stops a backward pass between
  // the ops of its rules, and a composite between its parts; nothing is committed by then.
  if (env.cancelled && env.cancelled()) {
    return Error(Reason::kCancelled, absl::StrCat(op, ": the call was cancelled"), {{"op", op}});
  }
  if (env.sequence != nullptr) {
    CallSequence::Entry* entry = env.sequence->Next(op, attr_map);
    if (entry == nullptr) {
      ASSIGN_OR_RETURN(const OpDef* found, registry_.Find(op));
      entry = env.sequence->Add(op, *found, attr_map);
    }
    return Call(*entry->def, std::move(inputs), attr_map, env, &entry->plan);
  }
  ASSIGN_OR_RETURN(const OpDef* found, registry_.Find(op));
  return Call(*found, std::move(inputs), attr_map, env);
}

namespace {

// Whether `plan` was made for inputs of these dtypes, shapes and devices.
bool PlannedFor(const CallPlan& plan, const std::vector<Tensor>& inputs) {
  if (!plan.has_kernel || plan.inputs.size() != inputs.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorMeta& m = plan.inputs[i];
    const Tensor& t = inputs[i];
    if (m.dtype != t.dtype() || m.wrapped_number != t.wrapped_number() || m.shape != t.shape() ||
        m.device != t.device()) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> Dispatcher::Call(const OpDef& resolved,
                                                     std::vector<Tensor> inputs,
                                                     const AttrMap& attr_map,
                                                     const CallEnv& env) const {
  return Call(resolved, std::move(inputs), attr_map, env, nullptr);
}

absl::StatusOr<std::vector<Tensor>> Dispatcher::Call(const OpDef& resolved,
                                                     std::vector<Tensor> inputs,
                                                     const AttrMap& attr_map, const CallEnv& env,
                                                     CallPlan* plan) const {
  const OpDef* def = &resolved;
  const std::string& op = def->name;
  const int n = static_cast<int>(inputs.size());
  if (def->collective != CollectiveKind::kNone) {
    return CallCollective(*def, std::move(inputs), attr_map, env);
  }
  RETURN_IF_ERROR(CheckArity(*def, n));
  Attrs validated;
  if (plan == nullptr || !plan->has_attrs) {
    ASSIGN_OR_RETURN(validated, ValidateAttrs(op, def->attrs, attr_map));
    if (plan != nullptr) {
      plan->attrs = validated;
      plan->has_attrs = true;
    }
  }
  const Attrs& attrs = plan != nullptr ? plan->attrs : validated;
  RETURN_IF_ERROR(CheckAutodiff(*def, inputs, env));
  const bool has_autodiff_input =
      std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.autograd(); });
  const bool record =
      has_autodiff_input && !env.no_grad &&
      (def->marking == Marking::kDifferentiable || def->marking == Marking::kZeroGrad);

  if (def->device_move) {
    ASSIGN_OR_RETURN(Tensor moved,
                     MoveToDevice(*this, inputs[0], attrs.GetString("device"), env.account));
    std::vector<Tensor> outputs{std::move(moved)};
    if (record) RecordOnContext(*def, attrs, inputs, inputs, outputs, env);
    return outputs;
  }
  // Devices: every tensor operand on one device (to_device is the way across).
  ASSIGN_OR_RETURN(const std::string device, CallDevice(*def, inputs, attrs, env));

  // Numbers only (1 - w in lerp's gradient, b - 1 in pow's): computed in the numbers' own
  // dtype, f64 for a float, and the result is a number again, as Python's arithmetic on two
  // numbers is. With a tensor present a float number takes the tensor's dtype.
  const bool numbers_only =
      def->promote_from >= 0 && n > 0 &&
      std::all_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.wrapped_number(); });
  const CompositeFn* composite = def->composite ? &def->composite : nullptr;
  if (def->composite_form && def->composite_form_when(attrs)) composite = &def->composite_form;
  // Promotion to the common dtype (binary arithmetic, where). The caller's tensors are kept
  // only where a record or a composite needs their autodiff identity.
  const bool keep_inputs = record || composite != nullptr;
  std::vector<Tensor> promoted = keep_inputs ? inputs : std::move(inputs);
  if (def->promote_from >= 0 && n > def->promote_from) {
    const auto promoted_operands = absl::MakeConstSpan(promoted).subspan(def->promote_from);
    DType common = numbers_only ? NumbersType(promoted_operands) : ResultType(promoted_operands);
    if (!numbers_only && !IsFloat(common) && def->integers_to_float &&
        def->integers_to_float(attrs)) {
      common = DType::kF32;
    }
    for (int i = def->promote_from; i < n; ++i) {
      Tensor& operand = promoted[i];  // still the caller's tensor here
      if (operand.dtype() == common) continue;
      if (plan != nullptr && i < static_cast<int>(plan->casts.size()) &&
          plan->casts[i].from == operand.storage() && plan->casts[i].to.dtype() == common) {
        operand = plan->casts[i].to;  // the same number as the last run's
        continue;
      }
      if (Tensor number = CastNumber(operand, common); number.defined()) {
        if (plan != nullptr) {
          if (plan->casts.size() < static_cast<size_t>(n)) plan->casts.resize(n);
          plan->casts[i] = {operand.storage(), number};
        }
        operand = std::move(number);
        continue;
      }
      CallEnv plain = env;
      plain.no_grad = true;
      ASSIGN_OR_RETURN(std::vector<Tensor> cast,
                       Call(opname::to_dtype, {operand.Detached()},
                            {{"dtype", std::string(DTypeName(common))}}, plain));
      operand = std::move(cast[0]);
    }
  }
  for (Tensor& t : promoted) t.set_autograd(nullptr);

  // The dtype the table names is checked on the primary operand (bf16/f16 wherever f32 is,
  // u8/i8/i16 wherever i32 is).
  const DTypeSet accepted =
      def->widen_storage_dtypes ? WithStorageDTypes(def->dtypes) : def->dtypes;
  if (!def->creation && n > 0 && !accepted.Contains(promoted[0].dtype()) &&
      def->dtypes.bits() != 0) {
    return Error(Reason::kDtypeMismatch,
                 absl::StrCat(op, ": dtype ", DTypeName(promoted[0].dtype()),
                              " is not supported (supported: ", accepted.ToString(), ")"),
                 {{"op", op},
                  {"dtype", std::string(DTypeName(promoted[0].dtype()))},
                  {"supported", accepted.ToString()}});
  }

  if (composite != nullptr) {
    CallEnv inner = env;
    inner.no_grad = env.no_grad || def->marking == Marking::kNonDifferentiable;
    // Composites see the caller's tensors (with autodiff identity) so constituents record.
    std::vector<Tensor> args = inputs;
    for (int i = 0; i < n; ++i) {
      if (promoted[i].dtype() != inputs[i].dtype()) {
        args[i] = promoted[i];
        if (inputs[i].autograd() && !inner.no_grad) {
          ASSIGN_OR_RETURN(std::vector<Tensor> cast,
                           Call(opname::to_dtype, {inputs[i]},
                                {{"dtype", std::string(DTypeName(promoted[i].dtype()))}}, inner));
          args[i] = std::move(cast[0]);
        }
      }
    }
    DispatchRunner runner(*this, inner);
    ASSIGN_OR_RETURN(std::vector<Tensor> outs, (*composite)(runner, args, attrs));
    if (def->marking == Marking::kNonDifferentiable) {
      for (Tensor& t : outs) t.set_autograd(nullptr);
    }
    return outs;
  }

  // Storage dtypes: computed in f32 or i32 unless a kernel takes them (storage_dtypes.h).
  ASSIGN_OR_RETURN(std::optional<std::vector<Tensor>> stored,
                   RunStorageDTypesWidened(*this, *def, promoted, attrs, device, env));
  std::vector<Tensor> outputs;
  if (stored) {
    outputs = std::move(*stored);
  } else if (plan != nullptr && PlannedFor(*plan, promoted)) {
    // The same call as planned: its outputs' types and kernel are known.
    outputs.reserve(plan->outputs.size());
    for (const TensorMeta& m : plan->outputs) {
      if (def->view) {
        outputs.emplace_back();  // the kernel returns a view
        continue;
      }
      ASSIGN_OR_RETURN(Tensor t, plan->backend->Allocate(m.dtype, m.shape, device, env.account));
      outputs.push_back(std::move(t));
    }
    KernelCall call{*def, promoted, attrs, outputs, plan->outputs, env.account, &plan->memo};
    absl::Status run = plan->backend->Run(plan->kernel, call);
    if (!run.ok()) return WithMetadata(run, {{"op", op}});
  } else {
    std::vector<TensorMeta> metas;
    std::vector<DType> dtypes;
    metas.reserve(promoted.size());
    dtypes.reserve(promoted.size());
    for (const Tensor& t : promoted) {
      metas.push_back(t.meta());
      dtypes.push_back(t.dtype());
    }
    ASSIGN_OR_RETURN(std::vector<TensorMeta> out_metas, def->infer(metas, attrs));
    ASSIGN_OR_RETURN(Backend * backend, BackendFor(device));
    // The kernel is chosen once, before anything is allocated for the call.
    absl::StatusOr<KernelPlan> kernel =
        backend->Plan({*def, dtypes, &attrs, metas, out_metas, device});
    if (!kernel.ok()) {
      if (GetReason(kernel.status()) != Reason::kUnsupportedOnBackend) return kernel.status();
      return Error(Reason::kUnsupportedOnBackend,
                   absl::StrCat(op, ": the ", backend->kind(), " backend (device ", device,
                                ") has no kernel for this call (dtype ",
                                n ? DTypeName(dtypes[0]) : "-", ")"),
                   {{"op", op}, {"backend", backend->kind()}, {"device", device}});
    }
    outputs.resize(out_metas.size());
    for (size_t k = 0; k < out_metas.size(); ++k) {
      bool known = std::all_of(out_metas[k].shape.begin(), out_metas[k].shape.end(),
                               [](int64_t d) { return d >= 0; });
      if (!known || def->view) continue;
      ASSIGN_OR_RETURN(outputs[k], backend->Allocate(out_metas[k].dtype, out_metas[k].shape, device,
                                                     env.account));
    }
    // A plan made for other input types keeps nothing its memo holds.
    if (plan != nullptr) plan->memo.state.reset();
    KernelCall call{*def,
                    promoted,
                    attrs,
                    outputs,
                    out_metas,
                    env.account,
                    plan != nullptr ? &plan->memo : nullptr};
    absl::Status run = backend->Run(*kernel, call);
    if (!run.ok()) return WithMetadata(run, {{"op", op}});
    const bool known = std::all_of(out_metas.begin(), out_metas.end(), [](const TensorMeta& m) {
      return std::all_of(m.shape.begin(), m.shape.end(), [](int64_t d) { return d >= 0; });
    });
    if (plan != nullptr && known) {
      plan->inputs = std::move(metas);
      plan->outputs = std::move(out_metas);
      plan->backend = backend;
      plan->kernel = *kernel;
      plan->has_kernel = true;
    }
  }

  if (numbers_only) {
    for (Tensor& t : outputs) {
      if (t.defined() && t.rank() == 0 && t.storage()->on_host()) t.set_wrapped_number(true);
    }
  }
  if (record) RecordOnContext(*def, attrs, inputs, promoted, outputs, env);
  return outputs;
}

void Dispatcher::RecordOnContext(const OpDef& def, const Attrs& attrs,
                                 const std::vector<Tensor>& inputs,
                                 const std::vector<Tensor>& promoted, std::vector<Tensor>& outputs,
                                 const CallEnv& env) const {
  uint64_t ctx_id = 0;
  for (const Tensor& t : inputs) {
    if (t.autograd()) ctx_id = t.autograd()->context_id;
  }
  AutodiffContext* ctx = env.contexts(ctx_id);
  if (env.recorder != nullptr && env.recorder->context_id() == ctx_id) {
    env.recorder->Record(*ctx, def, attrs, inputs, promoted, outputs);
  } else {
    ctx->Record(def, attrs, inputs, promoted, outputs);
  }
}

absl::StatusOr<std::vector<LeafGradient>> Dispatcher::Backward(
    AutodiffContext& ctx, const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds,
    bool retain_graph, const CallEnv& env, LeafGradientSink* sink) const {
  if (!env.autodiff_enabled || ctx.state() != ContextState::kOpen) {
    std::string state = env.autodiff_enabled ? ContextStateName(ctx.state()) : "disabled";
    return Error(Reason::kAutodiffContextNotEnabled,
                 absl::StrCat("autodiff: backward on context ", ctx.id(), ", which is ", state),
                 {{"context_id", Id(ctx.id())}, {"context_state", state}});
  }
  CallEnv plain = env;
  plain.no_grad = true;
  DispatchRunner runner(*this, plain);
  return RunBackward(ctx, roots, seeds, retain_graph, runner, sink);
}

}  // namespace tensord
