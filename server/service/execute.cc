#include "server/service/execute.h"

#include <limits>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/core/status.h"
#include "server/service/batch_fusion.h"
#include "server/service/transaction.h"

namespace tensord {
namespace {

std::string Str(uint64_t v) { return absl::StrCat(v); }

absl::StatusOr<Tensor> ResolveOperand(const OperandSpec& operand, size_t k, size_t i,
                                      const std::vector<std::vector<Tensor>>& done,
                                      Session& session, const Dispatcher& dispatcher,
                                      const ServiceLimits& limits, const ProgramValues* bound) {
  const auto& src = operand.source;
  if (const auto* h = std::get_if<OperandSpec::Handle>(&src)) return session.Get(h->handle);
  if (const auto* p = std::get_if<OperandSpec::Parameter>(&src)) {
    if (bound == nullptr) {
      return Error(Reason::kBadOperand,
                   absl::StrCat("execute: input ", i, " of call ", k,
                                " is a program parameter, which only CompileProgram takes"));
    }
    if (p->index >= bound->parameters.size()) {
      return Error(
          Reason::kBadOperand,
          absl::StrCat("program: input ", i, " of call ", k, " refers to parameter ", p->index,
                       " of a program with ", bound->parameters.size(), " parameters"),
          {{"parameter_index", Str(p->index)}});
    }
    return bound->parameters[p->index];
  }
  if (const auto* g = std::get_if<OperandSpec::Gradient>(&src)) {
    if (bound == nullptr || !bound->gradients_ready) {
      return Error(Reason::kBadOperand,
                   absl::StrCat(bound == nullptr ? "execute" : "program", ": input ", i,
                                " of call ", k, " is the gradient of tensor ", g->leaf,
                                ", which only the updates of a program with a backward take"),
                   {{"tensor_id", Str(g->leaf)}});
    }
    for (const auto& [leaf, grad] : bound->gradients) {
      if (leaf == g->leaf) return grad;
    }
    return Error(Reason::kBadOperand,
                 absl::StrCat("program: input ", i, " of call ", k, " is the gradient of tensor ",
                              g->leaf, ", which is not one of the backward's leaves"),
                 {{"tensor_id", Str(g->leaf)}});
  }
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
  if (const auto* s = std::get_if<OperandSpec::Scalar>(&src)) {
    return operand.number.defined() ? operand.number : NumberTensor(*s);
  }
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
                                            uint64_t context_id, const CallEnv& env,
                                            Session& session, const Dispatcher& dispatcher,
                                            Transaction& txn, const ServiceLimits& limits,
                                            const ProgramValues* bound, CallPlan* plan) {
  if (env.cancelled && env.cancelled()) {
    return Error(Reason::kCancelled, absl::StrCat("execute: the call was cancelled before call ", k,
                                                  "; the batch was rolled back"));
  }
  const OpDef* def = call.def;
  if (def == nullptr) {
    absl::StatusOr<const OpDef*> found = dispatcher.registry().Find(call.op);
    // Internal helpers of backward rules are not part of the API: they look unknown.
    if (!found.ok() || (*found)->internal) {
      return Error(Reason::kUnknownOp,
                   absl::StrCat("execute: unknown op '", call.op, "' (see ListOps)"),
                   {{"op", call.op}});
    }
    def = *found;
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
  inputs.reserve(call.inputs.size());
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    auto t = ResolveOperand(call.inputs[i], k, i, done, session, dispatcher, limits, bound);
    if (!t.ok()) return WithMetadata(t.status(), {{"input_index", Str(i)}});
    inputs.push_back(*std::move(t));
  }
  AutodiffContext* leaf_ctx = nullptr;
  if (call.requires_grad) {
    ASSIGN_OR_RETURN(leaf_ctx, session.OpenContextForLeaf(context_id, "execute"));
  }
  if (def->in_place && !inputs.empty()) RETURN_IF_ERROR(txn.SaveInPlaceTarget(inputs[0]));
  for (int i : def->mutates_inputs) {
    if (i < static_cast<int>(inputs.size())) RETURN_IF_ERROR(txn.SaveInPlaceTarget(inputs[i]));
  }
  std::vector<Tensor> outputs;
  ASSIGN_OR_RETURN(outputs, dispatcher.Call(*def, std::move(inputs), call.attrs, env, plan));
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

Tensor NumberTensor(const OperandSpec::Scalar& s) {
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

CallEnv BatchEnv(Session& session, bool no_grad, const std::function<bool()>& cancelled) {
  CallEnv env;
  env.account = session.account();
  env.device = session.device();
  env.no_grad = no_grad;
  env.autodiff_enabled = session.autodiff_enabled();
  env.contexts = [&session](uint64_t id) { return session.LookupContext(id); };
  env.cancelled = cancelled;
  env.group = session.group();
  return env;
}

absl::StatusOr<std::vector<Tensor>> RunBatchCall(const CallSpec& call, size_t k,
                                                 const std::vector<std::vector<Tensor>>& done,
                                                 uint64_t context_id, const CallEnv& env,
                                                 Session& session, const Dispatcher& dispatcher,
                                                 Transaction& txn, const ExecuteLimits& limits,
                                                 const CallObserver& observe,
                                                 const ProgramValues* bound, CallPlan* plan) {
  absl::StatusOr<std::vector<Tensor>> outs;
  const absl::Time started = observe ? absl::Now() : absl::InfinitePast();
  // Kernels report allocation failures themselves (the backend catches std::bad_alloc at
  // its kernel boundary); what is left is host memory of the batch itself (undo copies of
  // in-place targets, operand lists), which must roll back like any failure, not end the
  // server.
  try {
    outs = RunCall(call, k, done, context_id, env, session, dispatcher, txn, limits.tensor_limits,
                   bound, plan);
  } catch (const std::bad_alloc&) {
    outs = Error(Reason::kOutOfMemory,
                 absl::StrCat("execute: out of host memory in call ", k, " (", call.op,
                              "); the batch was rolled back"),
                 {{"op", call.op}});
  }
  if (observe) observe(call, absl::Now() - started);
  if (!outs.ok()) {
    Metadata md = {{"call_index", Str(k)}, {"op", call.op}};
    // In a process group every rank runs the same batch: a failure says which rank it is.
    if (env.group != nullptr) {
      md["group"] = env.group->name();
      md["rank"] = Str(env.group->rank());
    }
    return WithMetadata(outs.status(), md);
  }
  return outs;
}

absl::StatusOr<std::vector<std::vector<std::string>>> FetchOutputs(
    const std::vector<const CallSpec*>& calls, const std::vector<std::vector<Tensor>>& done,
    const Dispatcher& dispatcher, const ExecuteLimits& limits, int64_t& fetch_bytes) {
  std::vector<std::vector<std::string>> fetched(calls.size());
  for (size_t k = 0; k < calls.size(); ++k) {
    if (!calls[k]->fetch) continue;
    for (const Tensor& t : done[k]) {
      fetch_bytes += static_cast<int64_t>(t.nbytes());
      if (fetch_bytes > limits.max_fetch_bytes) {
        return Error(Reason::kLimitExceeded,
                     absl::StrCat("execute: fetched values reach ", fetch_bytes, " bytes at call ",
                                  k, ", above the inline limit of ", limits.max_fetch_bytes,
                                  " bytes; fetch large tensors with GetTensor"),
                     {{"limit", "fetch_bytes"},
                      {"max", Str(limits.max_fetch_bytes)},
                      {"call_index", Str(k)},
                      {"op", calls[k]->op}});
      }
      std::string bytes(t.nbytes(), '\0');
      absl::Status st = dispatcher.ToHost(t, bytes.data());
      if (!st.ok()) return WithMetadata(st, {{"call_index", Str(k)}, {"op", calls[k]->op}});
      fetched[k].push_back(std::move(bytes));
    }
  }
  return fetched;
}

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

namespace {

// Runs `chain`'s fused call at its producer's place `k`; false (and nothing left of the
// attempt) where it cannot run, and the calls then run as written, so that a failure names
// the call the client wrote.
bool RunFused(const BatchChain& chain, size_t k, const std::vector<std::vector<Tensor>>& done,
              uint64_t context_id, const CallEnv& env, Session& session,
              const Dispatcher& dispatcher, Transaction& txn, const ExecuteLimits& limits,
              const CallObserver& observe, std::vector<Tensor>& outputs) {
  const absl::Time started = absl::Now();
  absl::StatusOr<std::vector<Tensor>> outs = RunBatchCall(
      chain.fused, k, done, context_id, env, session, dispatcher, txn, limits, CallObserver());
  if (!outs.ok()) return false;
  if (observe) observe(chain.fused, absl::Now() - started);
  outputs = *std::move(outs);
  return true;
}

}  // namespace

std::vector<std::vector<size_t>> DiscardedAfter(const std::vector<CallSpec>& calls) {
  std::vector<int64_t> last(calls.size(), -1);  // per call, the last call reading it
  for (size_t k = 0; k < calls.size(); ++k) {
    for (const OperandSpec& operand : calls[k].inputs) {
      const auto* c = std::get_if<OperandSpec::CallOutput>(&operand.source);
      if (c != nullptr && c->call < k) last[c->call] = static_cast<int64_t>(k);
    }
  }
  std::vector<std::vector<size_t>> drops(calls.size());
  for (size_t k = 0; k < calls.size(); ++k) {
    if (!calls[k].discard || calls[k].fetch) continue;
    drops[last[k] < 0 ? k : static_cast<size_t>(last[k])].push_back(k);
  }
  return drops;
}

absl::StatusOr<std::vector<CallOutcome>> ExecuteBatch(Session& session,
                                                      const Dispatcher& dispatcher,
                                                      const BatchSpec& batch,
                                                      const std::function<bool()>& cancelled,
                                                      const ExecuteLimits& limits,
                                                      const CallObserver& observe, bool fusion) {
  const CallEnv env = BatchEnv(session, batch.no_grad, cancelled);
  Transaction txn(session, dispatcher);
  const size_t n = batch.calls.size();
  const std::vector<std::vector<size_t>> drops = DiscardedAfter(batch.calls);
  // Fused chains (batch_fusion.h): a chain's fused call runs at its producer's place; its
  // absorbed calls then run no more, and the last of them takes the fused call's outputs.
  const std::vector<BatchChain> chains =
      fusion ? FindBatchChains(batch, dispatcher) : std::vector<BatchChain>();
  std::vector<const BatchChain*> chain_at(n, nullptr);
  for (const BatchChain& chain : chains) chain_at[chain.producer] = &chain;
  std::vector<bool> absorbed(n, false);
  std::vector<std::vector<Tensor>> fused_outputs(n);
  std::vector<std::vector<Tensor>> done;
  done.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    if (absorbed[k]) {
      done.push_back(std::move(fused_outputs[k]));
    } else if (std::vector<Tensor> fused;
               chain_at[k] != nullptr &&
               RunFused(*chain_at[k], k, done, batch.context_id, env, session, dispatcher, txn,
                        limits, observe, fused)) {
      for (size_t a : chain_at[k]->absorbed) absorbed[a] = true;
      fused_outputs[chain_at[k]->absorbed.back()] = std::move(fused);
      done.emplace_back();  // the product exists nowhere
    } else {
      auto outs = RunBatchCall(batch.calls[k], k, done, batch.context_id, env, session, dispatcher,
                               txn, limits, observe);
      if (!outs.ok()) {
        txn.Rollback();
        return outs.status();
      }
      done.push_back(*std::move(outs));
    }
    for (size_t d : drops[k]) done[d].clear();
  }

  // Fetches are checked and copied before anything is committed, so an oversized response
  // rolls back like any other failure.
  std::vector<const CallSpec*> calls;
  for (const CallSpec& call : batch.calls) calls.push_back(&call);
  int64_t fetch_bytes = 0;
  auto fetched = FetchOutputs(calls, done, dispatcher, limits, fetch_bytes);
  if (!fetched.ok()) {
    txn.Rollback();
    return fetched.status();
  }

  std::vector<CallOutcome> results(batch.calls.size());
  for (size_t k = 0; k < batch.calls.size(); ++k) {
    for (Tensor& t : done[k]) {
      const uint64_t handle = batch.calls[k].discard ? 0 : session.Store(t);
      results[k].outputs.push_back({handle, std::move(t)});
    }
    results[k].fetched = std::move((*fetched)[k]);
  }
  return results;
}

}  // namespace tensord
