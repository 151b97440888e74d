#include "server/service/execute.h"

#include <limits>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/core/status.h"

namespace tensord {
namespace {

std::string Str(uint64_t v) { return absl::StrCat(v); }

// Everything a batch changes before it commits, so a failure can put it back: the tape length
// of every context, and the prior bytes of every tensor an in-place op writes into.
class Transaction {
 public:
  Transaction(Session& session, const Dispatcher& dispatcher) : dispatcher_(dispatcher) {
    for (const AutodiffContext* c : session.contexts()) {
      AutodiffContext* ctx = session.LookupContext(c->id());
      tapes_.emplace_back(ctx, ctx->tape_size());
    }
  }

  // Called before an in-place op runs on `target`.
  absl::Status SaveInPlaceTarget(const Tensor& target) {
    if (!target.defined() || target.storage() == nullptr) return absl::OkStatus();
    // A host tensor, so the copy comes from the pooled host memory: an optimizer step saves
    // every parameter and state tensor it writes, and fresh pages for those copies cost more
    // than the step itself (a page fault each).
    ASSIGN_OR_RETURN(Tensor copy, Tensor::Empty(target.dtype(), target.shape()));
    if (target.nbytes() > 0) RETURN_IF_ERROR(dispatcher_.ToHost(target, copy.raw()));
    undo_.push_back(Undo{target, std::move(copy), target.storage()->version()});
    return absl::OkStatus();
  }

  void Rollback() {
    // Newest first, so a tensor assigned twice ends with its pre-batch bytes and version.
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
      auto backend = dispatcher_.BackendFor(it->target.device());
      // The device existed a moment ago and copying back into an allocated buffer cannot
      // fail on any backend we have; should it, the version stays bumped, so backward
      // refuses the changed values instead of silently using them.
      if (!backend.ok() ||
          !(*backend)->CopyFromHost(it->bytes.raw(), it->bytes.nbytes(), it->target).ok()) {
        it->target.storage()->BumpVersion();
        continue;
      }
      it->target.storage()->RestoreVersion(it->version);
    }
    undo_.clear();
    for (auto& [ctx, size] : tapes_) ctx->TruncateTape(size);
  }

 private:
  struct Undo {
    Tensor target;
    Tensor bytes;  // the prior value, in host memory
    uint64_t version;
  };
  const Dispatcher& dispatcher_;
  std::vector<std::pair<AutodiffContext*, size_t>> tapes_;
  std::vector<Undo> undo_;
};

Tensor ScalarTensor(const OperandSpec::Scalar& s) {
  Tensor t;
  if (std::holds_alternative<double>(s)) {
    t = Tensor::Scalar<double>(std::get<double>(s));
  } else if (std::holds_alternative<int64_t>(s)) {
    t = Tensor::Scalar<int64_t>(std::get<int64_t>(s));
  } else {
    t = Tensor::Scalar<bool>(std::get<bool>(s));
  }
  t.set_wrapped_number(true);
  return t;
}

absl::StatusOr<Tensor> ResolveOperand(const OperandSpec& operand, size_t k, size_t i,
                                      const std::vector<std::vector<Tensor>>& done,
                                      Session& session, const Dispatcher& dispatcher,
                                      const ServiceLimits& limits) {
  const auto& src = operand.source;
  if (const auto* h = std::get_if<OperandSpec::Handle>(&src)) return session.Get(h->handle);
  if (const auto* c = std::get_if<OperandSpec::CallOutput>(&src)) {
    if (c->call >= k) {
      return Error(Reason::kBadOperand,
                   absl::StrCat("execute: input ", i, " of call ", k, " refers to call ", c->call,
                                ", which is not an earlier call of the batch"),
                   {{"operand_call", Str(c->call)}});
    }
    if (c->output >= done[c->call].size()) {
      return Error(
          Reason::kBadOperand,
          absl::StrCat("execute: input ", i, " of call ", k, " refers to output ", c->output,
                       " of call ", c->call, ", which has ", done[c->call].size(), " outputs"),
          {{"operand_call", Str(c->call)}, {"operand_output", Str(c->output)}});
    }
    return done[c->call][c->output];
  }
  if (const auto* lit = std::get_if<OperandSpec::Literal>(&src)) {
    RETURN_IF_ERROR(CheckTensorLimits(limits, lit->dtype, lit->shape, "literal"));
    return LiteralTensor(dispatcher, session, *lit);
  }
  if (const auto* s = std::get_if<OperandSpec::Scalar>(&src)) return ScalarTensor(*s);
  return Error(Reason::kBadOperand,
               absl::StrCat("execute: input ", i, " of call ", k,
                            " names no source (handle, call_output, literal or scalar)"));
}

// Makes the float outputs of a requires_grad call fresh leaves of `ctx`.
absl::Status MakeLeaves(const std::string& op, size_t k, AutodiffContext& ctx,
                        std::vector<Tensor>& outputs) {
  bool any_float = false;
  for (Tensor& t : outputs) {
    if (t.autograd()) {
      return Error(Reason::kInvalidRequest,
                   absl::StrCat("execute: call ", k, " (", op,
                                ") asks for requires_grad, but its outputs are already recorded "
                                "on context ",
                                t.autograd()->context_id,
                                "; only new tensors can be leaves (detach the inputs)"));
    }
    if (!IsFloat(t.dtype())) continue;
    any_float = true;
    t.set_autograd(MakeLeafMeta(ctx.id(), 0));
  }
  if (!any_float) {
    return Error(Reason::kDtypeMismatch,
                 absl::StrCat("execute: call ", k, " (", op,
                              ") asks for requires_grad, but none of its outputs is a float "
                              "tensor; only float tensors can require gradients"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> RunCall(const CallSpec& call, size_t k,
                                            const std::vector<std::vector<Tensor>>& done,
                                            const BatchSpec& batch, const CallEnv& env,
                                            Session& session, const Dispatcher& dispatcher,
                                            Transaction& txn, const ServiceLimits& limits) {
  if (env.cancelled && env.cancelled()) {
    return Error(Reason::kCancelled, absl::StrCat("execute: the call was cancelled before call ", k,
                                                  "; the batch was rolled back"));
  }
  auto def = dispatcher.registry().Find(call.op);
  // Internal helpers of backward rules are not part of the API: they look unknown.
  if (!def.ok() || (*def)->internal) {
    return Error(Reason::kUnknownOp,
                 absl::StrCat("execute: unknown op '", call.op, "' (see ListOps)"),
                 {{"op", call.op}});
  }
  // Shapes a creation or reshape call asks for, refused before its output is allocated.
  for (const char* name : {"shape", "size"}) {
    auto it = call.attrs.find(name);
    if (it == call.attrs.end()) continue;
    if (const auto* dims = std::get_if<std::vector<int64_t>>(&it->second)) {
      absl::Status st = CheckShapeLimits(limits, *dims, call.op);
      if (!st.ok()) return WithMetadata(st, {{"attribute", name}});
    }
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    auto t = ResolveOperand(call.inputs[i], k, i, done, session, dispatcher, limits);
    if (!t.ok()) return WithMetadata(t.status(), {{"input_index", Str(i)}});
    inputs.push_back(*std::move(t));
  }
  AutodiffContext* leaf_ctx = nullptr;
  if (call.requires_grad) {
    ASSIGN_OR_RETURN(leaf_ctx, session.OpenContextForLeaf(batch.context_id, "execute"));
  }
  if ((*def)->in_place && !inputs.empty()) RETURN_IF_ERROR(txn.SaveInPlaceTarget(inputs[0]));
  for (int i : (*def)->mutates_inputs) {
    if (i < static_cast<int>(inputs.size())) RETURN_IF_ERROR(txn.SaveInPlaceTarget(inputs[i]));
  }
  std::vector<Tensor> outputs;
  ASSIGN_OR_RETURN(outputs, dispatcher.Call(call.op, std::move(inputs), call.attrs, env));
  // Bytes were charged against max_tensor_bytes before allocation; rank and dims of outputs
  // an op derives from its inputs (expand, repeat, unsqueeze...) are checked here, before the
  // batch commits.
  for (size_t o = 0; o < outputs.size(); ++o) {
    absl::Status st = CheckShapeLimits(limits, outputs[o].shape(), call.op);
    if (!st.ok()) return WithMetadata(st, {{"output_index", Str(o)}});
  }
  if (leaf_ctx != nullptr) RETURN_IF_ERROR(MakeLeaves(call.op, k, *leaf_ctx, outputs));
  return outputs;
}

}  // namespace

absl::StatusOr<Tensor> LiteralTensor(const Dispatcher& dispatcher, const Session& session,
                                     const OperandSpec::Literal& literal) {
  int64_t n;
  ASSIGN_OR_RETURN(n, CheckedNumElements(literal.shape));
  const int64_t size = static_cast<int64_t>(DTypeSize(literal.dtype));
  if (n > std::numeric_limits<int64_t>::max() / size ||
      static_cast<int64_t>(literal.data.size()) != n * size) {
    return Error(Reason::kBadTensorData,
                 absl::StrCat("literal: ", literal.data.size(), " bytes do not match shape ",
                              ShapeToString(literal.shape), " of ", DTypeName(literal.dtype)),
                 {{"shape", ShapeToString(literal.shape)},
                  {"dtype", std::string(DTypeName(literal.dtype))},
                  {"bytes", Str(literal.data.size())}});
  }
  return dispatcher.FromHost(literal.dtype, literal.shape, session.device(), literal.data.data(),
                             literal.data.size(), session.account());
}

absl::StatusOr<std::vector<CallOutcome>> ExecuteBatch(Session& session,
                                                      const Dispatcher& dispatcher,
                                                      const BatchSpec& batch,
                                                      const std::function<bool()>& cancelled,
                                                      const ExecuteLimits& limits,
                                                      const CallObserver& observe) {
  CallEnv env;
  env.account = session.account();
  env.device = session.device();
  env.no_grad = batch.no_grad;
  env.autodiff_enabled = session.autodiff_enabled();
  env.contexts = [&session](uint64_t id) { return session.LookupContext(id); };
  env.cancelled = cancelled;

  Transaction txn(session, dispatcher);
  std::vector<std::vector<Tensor>> done;
  std::vector<std::vector<std::string>> fetched(batch.calls.size());
  auto fail = [&](absl::Status st, size_t k) {
    txn.Rollback();
    return WithMetadata(std::move(st), {{"call_index", Str(k)}, {"op", batch.calls[k].op}});
  };
  for (size_t k = 0; k < batch.calls.size(); ++k) {
    absl::StatusOr<std::vector<Tensor>> outs;
    const absl::Time started = observe ? absl::Now() : absl::InfinitePast();
    // Kernels report allocation failures themselves (the backend catches std::bad_alloc at
    // its kernel boundary); what is left is host memory of the batch itself (undo copies of
    // in-place targets, operand lists), which must roll back like any failure, not end the
    // server.
    try {
      outs = RunCall(batch.calls[k], k, done, batch, env, session, dispatcher, txn,
                     limits.tensor_limits);
    } catch (const std::bad_alloc&) {
      outs = Error(Reason::kOutOfMemory,
                   absl::StrCat("execute: out of host memory in call ", k, " (", batch.calls[k].op,
                                "); the batch was rolled back"),
                   {{"op", batch.calls[k].op}});
    }
    if (observe) observe(batch.calls[k], absl::Now() - started);
    if (!outs.ok()) return fail(outs.status(), k);
    done.push_back(*std::move(outs));
  }

  // Fetches are checked and copied before anything is committed, so an oversized response
  // rolls back like any other failure.
  int64_t fetch_bytes = 0;
  for (size_t k = 0; k < batch.calls.size(); ++k) {
    if (!batch.calls[k].fetch) continue;
    for (const Tensor& t : done[k]) {
      fetch_bytes += static_cast<int64_t>(t.nbytes());
      if (fetch_bytes > limits.max_fetch_bytes) {
        return fail(
            Error(Reason::kLimitExceeded,
                  absl::StrCat("execute: fetched values reach ", fetch_bytes, " bytes at call ", k,
                               ", above the inline limit of ", limits.max_fetch_bytes,
                               " bytes; fetch large tensors with GetTensor"),
                  {{"limit", "fetch_bytes"}, {"max", Str(limits.max_fetch_bytes)}}),
            k);
      }
      std::string bytes(t.nbytes(), '\0');
      absl::Status st = dispatcher.ToHost(t, bytes.data());
      if (!st.ok()) return fail(st, k);
      fetched[k].push_back(std::move(bytes));
    }
  }

  std::vector<CallOutcome> results(batch.calls.size());
  for (size_t k = 0; k < batch.calls.size(); ++k) {
    for (Tensor& t : done[k]) {
      const uint64_t handle = session.Store(t);
      results[k].outputs.push_back({handle, std::move(t)});
    }
    results[k].fetched = std::move(fetched[k]);
  }
  return results;
}

}  // namespace tensord
