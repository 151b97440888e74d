#include "server/service/program.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/service/program_fusion.h"
#include "server/service/program_memory_plan.h"
#include "server/service/transaction.h"

namespace tensord {
namespace {

std::string Str(uint64_t v) { return absl::StrCat(v); }

// The program's context, open; null for a program without one.
absl::StatusOr<AutodiffContext*> ProgramContext(Session& session, const ProgramSpec& spec) {
  if (spec.context_id == 0) return nullptr;
  const std::string id = Str(spec.context_id);
  if (!session.autodiff_enabled()) {
    return Error(Reason::kAutodiffContextNotEnabled,
                 absl::StrCat("program: names context ", id, " in session ", session.id(),
                              ", which was created with autodiff disabled"),
                 {{"context_id", id}, {"context_state", "disabled"}});
  }
  ASSIGN_OR_RETURN(AutodiffContext * ctx, session.FindContext(spec.context_id));
  if (ctx->state() != ContextState::kOpen) {
    return Error(Reason::kAutodiffContextNotEnabled,
                 absl::StrCat("program: its context ", id,
                              " is closed; compile the program again in an open context"),
                 {{"context_id", id}, {"context_state", ContextStateName(ctx->state())}});
  }
  return ctx;
}

// "a float number", "an int number", "a bool number".
std::string KindNumber(size_t kind) {
  return kind == 0 ? "a float number" : kind == 1 ? "an int number" : "a bool number";
}

// The value bound to parameter `p`: a handle, a literal or a number, of `type` when known.
absl::StatusOr<Tensor> BindParameter(const OperandSpec& operand, size_t p,
                                     const ParameterSpec& param, const ParameterType* type,
                                     Session& session, const Dispatcher& dispatcher,
                                     const ServiceLimits& limits) {
  const Metadata where{{"parameter_index", Str(p)}, {"parameter", param.name}};
  const std::string what = param.name.empty()
                               ? absl::StrCat("program: parameter ", p)
                               : absl::StrCat("program: parameter ", p, " (", param.name, ")");
  Tensor t;
  const auto& src = operand.source;
  if (const auto* h = std::get_if<OperandSpec::Handle>(&src)) {
    auto got = session.Get(h->handle);
    if (!got.ok()) return WithMetadata(got.status(), where);
    t = *std::move(got);
  } else if (const auto* lit = std::get_if<OperandSpec::Literal>(&src)) {
    absl::Status st = CheckTensorLimits(limits, lit->dtype, lit->shape, "literal");
    if (!st.ok()) return WithMetadata(st, where);
    auto got = LiteralTensor(dispatcher, session, *lit);
    if (!got.ok()) return WithMetadata(got.status(), where);
    t = *std::move(got);
  } else if (const auto* s = std::get_if<OperandSpec::Scalar>(&src)) {
    if (type != nullptr && (!type->number || type->number_kind != s->index())) {
      return Error(type->number ? Reason::kDtypeMismatch : Reason::kBadOperand,
                   absl::StrCat(what, " takes ",
                                type->number ? KindNumber(type->number_kind)
                                             : "a tensor (a handle or a literal)",
                                ", got ", KindNumber(s->index())),
                   where);
    }
    return NumberTensor(*s);
  } else {
    return Error(Reason::kBadOperand,
                 absl::StrCat(what, " must be bound to a handle, a literal or a number"), where);
  }
  if (type == nullptr) return t;
  if (type->number) {
    return Error(Reason::kBadOperand,
                 absl::StrCat(what, " takes ", KindNumber(type->number_kind), ", got a tensor"),
                 where);
  }
  if (t.dtype() != type->dtype) {
    Metadata m = where;
    m.emplace("expected", DTypeName(type->dtype));
    m.emplace("got", DTypeName(t.dtype()));
    return Error(Reason::kDtypeMismatch,
                 absl::StrCat(what, " was compiled for ", DTypeName(type->dtype), ", got ",
                              DTypeName(t.dtype())),
                 m);
  }
  if (t.shape() != type->shape) {
    Metadata m = where;
    m.emplace("expected", ShapeToString(type->shape));
    m.emplace("got", ShapeToString(t.shape()));
    return Error(
        Reason::kShapeMismatch,
        absl::StrCat(what, " was compiled for shape ", ShapeToString(type->shape), ", got ",
                     ShapeToString(t.shape()), "; compile a program for each shape"),
        m);
  }
  return t;
}

// Every leaf must be a requires-grad leaf of the context (checked at every run: a leaf may
// have been released since).
absl::Status CheckLeaves(Session& session, const ProgramSpec& spec) {
  for (size_t l = 0; l < spec.leaves.size(); ++l) {
    const Metadata where{{"leaf_index", Str(l)}, {"tensor_id", Str(spec.leaves[l])}};
    auto t = session.Get(spec.leaves[l]);
    if (!t.ok()) return WithMetadata(t.status(), where);
    const auto& meta = t->autograd();
    if (meta == nullptr || meta->grad_fn != nullptr || meta->context_id != spec.context_id) {
      return Error(Reason::kBadOperand,
                   absl::StrCat("program: leaf ", l, " (tensor ", spec.leaves[l],
                                ") is not a requires-grad leaf of context ", spec.context_id),
                   where);
    }
  }
  for (size_t b = 0; b < spec.reduction.buckets.size(); ++b) {
    for (uint64_t leaf : spec.reduction.buckets[b]) {
      if (std::find(spec.leaves.begin(), spec.leaves.end(), leaf) == spec.leaves.end()) {
        return Error(
            Reason::kBadOperand,
            absl::StrCat("program: gradient bucket ", b, " names tensor ", leaf,
                         ", which is not one of the backward's leaves"),
            {{"field", "backward.reduce"}, {"bucket_index", Str(b)}, {"tensor_id", Str(leaf)}});
      }
    }
  }
  return absl::OkStatus();
}

struct Steps {
  ProgramOutcome outcome;
  std::vector<ParameterType> types;            // of the bound values
  std::vector<std::vector<TensorMeta>> metas;  // per call
  CompiledBackward backward;                   // what a trial run planned (its nodes left empty)
  int64_t peak_bytes = 0;
};

// Samples the run's peak after every op a backward rule runs.
class SampledRunner : public OpRunner {
 public:
  SampledRunner(OpRunner& inner, PeakBytes& peak) : inner_(inner), peak_(peak) {}
  absl::StatusOr<std::vector<Tensor>> Run(const std::string& op, std::vector<Tensor> inputs,
                                          AttrMap attrs) override {
    auto outs = inner_.Run(op, std::move(inputs), std::move(attrs));
    peak_.Sample();
    return outs;
  }

 private:
  OpRunner& inner_;
  PeakBytes& peak_;
};

// The backward from `roots`. A trial run (`trial` given) plans it from the graph its forward
// recorded (`recorded`: the nodes it put on the tape). A run with `plan` runs that plan over
// the nodes `recorder` filled, or over those it finds from its roots when its forward recorded
// on the tape a graph of the plan's shape; otherwise it walks its own graph. One gradient per
// listed leaf, undefined where none arrived. `sink` (a reduction across the group) is told of
// each gradient once it is final.
absl::StatusOr<std::vector<Tensor>> ProgramBackward(
    AutodiffContext& ctx, const std::vector<Tensor>& roots, const std::vector<uint64_t>& leaves,
    const BackwardPlan* plan, PlannedRecorder* recorder, CompiledBackward* trial,
    absl::Span<const std::shared_ptr<Node>> recorded, const Dispatcher& dispatcher,
    const CallEnv& env, PeakBytes& peak, bool& planned, LeafGradientSink* sink) {
  BackwardGraph graph;
  // Whether the graph is this run's alone (none of its nodes recorded before the run): its
  // nodes are then freed as the backward goes.
  bool own_graph = false;
  if (trial != nullptr) {
    ASSIGN_OR_RETURN(BackwardPlan p, PlanBackward(ctx, roots, graph));
    trial->plan = std::make_shared<const BackwardPlan>(std::move(p));
    plan = trial->plan.get();
    if (std::optional<RecordingPlan> r = PlanRecording(*plan, graph, recorded)) {
      trial->recording = std::make_shared<const RecordingPlan>(*std::move(r));
      own_graph = true;
    }
  } else if (plan != nullptr && recorder != nullptr && recorder->Graph(roots, graph)) {
    own_graph = true;
  } else if (plan != nullptr && !FindPlannedGraph(*plan, roots, graph)) {
    plan = nullptr;
  }
  std::vector<std::pair<uint64_t, Tensor>> found;  // leaf tensor id, gradient
  if (plan != nullptr) {
    DispatchRunner dispatch(dispatcher, env);
    SampledRunner runner(dispatch, peak);
    ASSIGN_OR_RETURN(std::vector<Tensor> grads,
                     RunBackwardPlan(*plan, graph, roots, {}, runner, sink, own_graph));
    for (size_t l = 0; l < grads.size(); ++l) {
      if (grads[l].defined()) found.emplace_back(plan->leaf_ids[l], std::move(grads[l]));
    }
  } else {
    // The graph is kept while the updates run, so a failing update can roll the run back;
    // the commit frees it.
    ASSIGN_OR_RETURN(std::vector<LeafGradient> grads,
                     dispatcher.Backward(ctx, roots, {}, /*retain_graph=*/true, env, sink));
    for (LeafGradient& g : grads) found.emplace_back(g.leaf->tensor_id, std::move(g.grad));
  }
  planned = plan != nullptr;
  std::vector<Tensor> out(leaves.size());
  for (size_t l = 0; l < leaves.size(); ++l) {
    for (const auto& [id, grad] : found) {
      if (id == leaves[l]) out[l] = grad.Detached();
    }
  }
  return out;
}

// Forward, backward and updates in one transaction; committed only when `commit`.
absl::StatusOr<Steps> RunSteps(Session& session, const Dispatcher& dispatcher,
                               const ProgramSpec& spec, const std::vector<ParameterType>* types,
                               const std::vector<OperandSpec>& inputs, bool commit,
                               const std::function<bool()>& cancelled, const ExecuteLimits& limits,
                               const CallObserver& observe, RunPlans* plans = nullptr,
                               CompiledBackward* compiled = nullptr) {
  const CallEnv plain_env = BatchEnv(session, /*no_grad=*/true, cancelled);
  // The backward's reduction across the group meets the peers even when this run fails
  // before it, so that they fail alike instead of waiting for this rank.
  std::optional<GradientReduction> reduction;
  bool reduction_finished = false;
  if (spec.backward && !spec.reduction.empty()) {
    reduction.emplace(dispatcher, plain_env, spec.reduction, spec.context_id,
                      [&session](uint64_t h) { return session.Get(h); });
  }
  auto refuse = [&](absl::Status st) {
    if (reduction.has_value() && !reduction_finished) {
      reduction_finished = true;
      (void)reduction->Finish(st);
    }
    return st;
  };
  AutodiffContext* ctx = nullptr;
  ProgramValues bound;
  const absl::Status checked = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(ctx, ProgramContext(session, spec));
    if (inputs.size() != spec.parameters.size()) {
      return Error(
          Reason::kInvalidRequest,
          absl::StrCat("program: takes ", spec.parameters.size(), " inputs, got ", inputs.size()),
          {{"field", "inputs"},
           {"expected", Str(spec.parameters.size())},
           {"got", Str(inputs.size())}});
    }
    if (spec.backward) RETURN_IF_ERROR(CheckLeaves(session, spec));
    for (size_t p = 0; p < inputs.size(); ++p) {
      ASSIGN_OR_RETURN(
          Tensor t, BindParameter(inputs[p], p, spec.parameters[p], types ? &(*types)[p] : nullptr,
                                  session, dispatcher, limits.tensor_limits));
      bound.parameters.push_back(std::move(t));
    }
    return absl::OkStatus();
  }();
  if (!checked.ok()) return refuse(checked);

  Transaction txn(session, dispatcher);
  auto fail = [&txn, &refuse](absl::Status st, const char* phase) {
    txn.Rollback();
    return refuse(WithMetadata(std::move(st), {{"phase", phase}}));
  };
  const size_t n_forward = spec.calls.size();
  std::vector<const CallSpec*> calls;
  for (const CallSpec& c : spec.calls) calls.push_back(&c);
  for (const CallSpec& c : spec.updates) calls.push_back(&c);
  std::vector<std::vector<Tensor>> done;
  done.reserve(calls.size());
  std::vector<std::vector<TensorMeta>> metas;  // per call, what compiling learns
  PeakBytes peak(session.account().get());
  // After call k: what compiling learns of it, the peak, and the outputs read no more.
  auto ran = [&](size_t k) {
    if (!commit) {
      std::vector<TensorMeta>& m = metas.emplace_back();
      for (const Tensor& t : done[k]) m.push_back(t.meta());
    }
    peak.Sample();
    if (k < spec.releases.size()) {
      for (uint32_t j : spec.releases[k]) done[j].clear();
    }
  };
  CallEnv forward_env = BatchEnv(session, spec.no_grad, cancelled);
  // Calls by op name find their plans in the sequence of the runs before (not the reduction's:
  // its thread calls by name while the backward goes on).
  CallEnv after_env = plain_env;
  if (plans != nullptr) {
    plans->by_name.Rewind();
    forward_env.sequence = after_env.sequence = &plans->by_name;
  }
  // A trial run notes what its forward records; a run records into the program's nodes.
  const size_t tape_start = ctx != nullptr ? ctx->tape_size() : 0;
  std::optional<PlannedRecorder> recorder;
  if (spec.backward && compiled != nullptr && compiled->recording != nullptr) {
    recorder.emplace(*compiled->plan, *compiled->recording, compiled->nodes);
    forward_env.recorder = &*recorder;
  }
  for (size_t k = 0; k < n_forward; ++k) {
    if (calls[k]->folded_into >= 0) {  // computed by a later call's fused op
      done.emplace_back();
      ran(k);
      continue;
    }
    auto outs = RunBatchCall(*calls[k], k, done, spec.context_id, forward_env, session, dispatcher,
                             txn, limits, observe, &bound, plans ? &plans->calls[k] : nullptr);
    if (!outs.ok()) return fail(outs.status(), "forward");
    done.push_back(*std::move(outs));
    ran(k);
  }

  CompiledBackward trial;
  bool planned = false;
  if (spec.backward) {
    std::vector<Tensor> roots;
    for (size_t r = 0; r < spec.roots.size(); ++r) {
      const auto& root = spec.roots[r];
      if (root.call >= n_forward || root.output >= done[root.call].size()) {
        return fail(Error(Reason::kBadOperand,
                          absl::StrCat("program: backward root ", r, " names output ", root.output,
                                       " of call ", root.call,
                                       ", which is not an output of a forward call"),
                          {{"root_index", Str(r)}}),
                    "backward");
      }
      roots.push_back(done[root.call][root.output]);
    }
    auto grads = ProgramBackward(
        *ctx, roots, spec.leaves, compiled != nullptr ? compiled->plan.get() : nullptr,
        recorder.has_value() ? &*recorder : nullptr, commit ? nullptr : &trial,
        ctx->NodesSince(tape_start), dispatcher, after_env, peak, planned,
        reduction.has_value() ? &*reduction : nullptr);
    if (reduction.has_value()) {
      reduction_finished = true;
      auto reduced = reduction->Finish(grads.status());
      if (!reduced.ok()) return fail(reduced.status(), "backward");
      for (auto& [leaf, grad] : *reduced) {
        for (size_t l = 0; l < spec.leaves.size(); ++l) {
          if (spec.leaves[l] == leaf) (*grads)[l] = std::move(grad);
        }
      }
    }
    if (!grads.ok()) return fail(grads.status(), "backward");
    for (size_t l = 0; l < spec.leaves.size(); ++l) {
      Tensor& grad = (*grads)[l];
      if (!grad.defined()) {
        return fail(Error(Reason::kBadOperand,
                          absl::StrCat("program: leaf ", l, " (tensor ", spec.leaves[l],
                                       ") is not reached from the backward's roots"),
                          {{"leaf_index", Str(l)}, {"tensor_id", Str(spec.leaves[l])}}),
                    "backward");
      }
      bound.gradients.emplace_back(spec.leaves[l], std::move(grad));
    }
    bound.gradients_ready = true;
    peak.Sample();
  }

  for (size_t k = n_forward; k < calls.size(); ++k) {
    if (calls[k]->folded_into >= 0) {
      done.emplace_back();
      ran(k);
      continue;
    }
    auto outs = RunBatchCall(*calls[k], k, done, spec.context_id, after_env, session, dispatcher,
                             txn, limits, observe, &bound, plans ? &plans->calls[k] : nullptr);
    if (!outs.ok()) return fail(outs.status(), "update");
    done.push_back(*std::move(outs));
    ran(k);
  }

  Steps steps;
  steps.backward = std::move(trial);
  steps.outcome.backward_planned = planned;
  steps.peak_bytes = peak.peak();
  steps.metas = std::move(metas);
  int64_t fetch_bytes = 0;
  auto fetched = FetchOutputs(calls, done, dispatcher, limits, fetch_bytes);
  if (!fetched.ok()) return fail(fetched.status(), "fetch");
  if (spec.fetch_gradients) {
    for (const auto& [leaf, grad] : bound.gradients) {
      fetch_bytes += static_cast<int64_t>(grad.nbytes());
      if (fetch_bytes > limits.max_fetch_bytes) {
        return fail(Error(Reason::kLimitExceeded,
                          absl::StrCat("program: fetched values and gradients reach ", fetch_bytes,
                                       " bytes, above the inline limit of ", limits.max_fetch_bytes,
                                       " bytes"),
                          {{"limit", "fetch_bytes"}, {"max", Str(limits.max_fetch_bytes)}}),
                    "fetch");
      }
      std::string bytes(grad.nbytes(), '\0');
      absl::Status st = dispatcher.ToHost(grad, bytes.data());
      if (!st.ok()) return fail(st, "fetch");
      steps.outcome.gradients.push_back(grad);
      steps.outcome.gradient_bytes.push_back(std::move(bytes));
    }
  }
  for (size_t p = 0; p < inputs.size() && !commit; ++p) {  // what compiling learns
    ParameterType& type = steps.types.emplace_back();
    if (const auto* s = std::get_if<OperandSpec::Scalar>(&inputs[p].source)) {
      type.number = true;
      type.number_kind = s->index();
    } else {
      type.dtype = bound.parameters[p].dtype();
      type.shape = bound.parameters[p].shape();
    }
  }
  if (!commit) {
    txn.Rollback();
    return steps;
  }

  steps.outcome.calls.resize(calls.size());
  for (size_t k = 0; k < calls.size(); ++k) {
    CallOutcome& out = steps.outcome.calls[k];
    for (Tensor& t : done[k]) {
      if (!calls[k]->keep && !calls[k]->fetch) break;
      // With a backward the run frees the graph it recorded: what it keeps is plain.
      Tensor value = spec.backward ? t.Detached() : std::move(t);
      const uint64_t handle = calls[k]->keep ? session.Store(value) : 0;
      out.outputs.push_back({handle, std::move(value)});
    }
    out.fetched = std::move((*fetched)[k]);
  }
  if (spec.backward) {
    txn.CommitDroppingRecorded();
  }
  return steps;
}

// Whether a run makes collective calls: collective ops, or a backward that reduces.
bool HasCollective(const ProgramSpec& spec) {
  if (!spec.reduction.empty()) return true;
  for (const std::vector<CallSpec>* calls : {&spec.calls, &spec.updates}) {
    for (const CallSpec& c : *calls) {
      if (c.def != nullptr && c.def->collective != CollectiveKind::kNone) return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Program>> CompileProgram(Session& session,
                                                        const Dispatcher& dispatcher,
                                                        ProgramSpec spec,
                                                        const std::function<bool()>& cancelled,
                                                        const ExecuteLimits& limits, bool fuse) {
  const int64_t n_calls = static_cast<int64_t>(spec.calls.size() + spec.updates.size());
  if (n_calls > limits.tensor_limits.max_calls_per_program) {
    return LimitError("program", "max_calls_per_program", n_calls,
                      limits.tensor_limits.max_calls_per_program, "calls (forward and updates)");
  }
  const int64_t held = static_cast<int64_t>(session.programs().size());
  if (held >= limits.tensor_limits.max_programs_per_session) {
    return WithMetadata(LimitError("program", "max_programs_per_session", held + 1,
                                   limits.tensor_limits.max_programs_per_session,
                                   "programs held with this one (release one first)"),
                        {{"session_id", session.id()}});
  }
  auto invalid = [](const std::string& message, const char* field) {
    return Error(Reason::kInvalidRequest, absl::StrCat("program: ", message), {{"field", field}});
  };
  if (spec.backward) {
    if (spec.context_id == 0) {
      return invalid("a backward needs the context_id its forward records on", "context_id");
    }
    if (spec.no_grad)
      return invalid("a no_grad forward records nothing to differentiate", "no_grad");
    if (spec.roots.empty()) return invalid("a backward needs at least one root", "backward.roots");
  }
  for (size_t j = 0; j < spec.updates.size(); ++j) {
    if (spec.updates[j].requires_grad) {
      return WithMetadata(invalid("updates run without recording and cannot make requires-grad "
                                  "leaves",
                                  "updates.requires_grad"),
                          {{"call_index", Str(spec.calls.size() + j)}});
    }
  }
  std::vector<OperandSpec> examples;
  for (const ParameterSpec& p : spec.parameters) examples.push_back(p.example);
  spec.releases = PlanReleases(spec);
  ASSIGN_OR_RETURN(Steps trial, RunSteps(session, dispatcher, spec, nullptr, examples,
                                         /*commit=*/false, cancelled, limits, {}));
  // The trial run found every op; runs use what it found.
  for (std::vector<CallSpec>* calls : {&spec.calls, &spec.updates}) {
    for (CallSpec& c : *calls) {
      absl::StatusOr<const OpDef*> found = dispatcher.registry().Find(c.op);
      if (found.ok()) c.def = *found;
    }
  }
  auto program = std::make_shared<Program>();
  program->backward = std::move(trial.backward);
  program->peak_bytes = trial.peak_bytes;
  if (fuse) {
    ProgramSpec fused = spec;
    const int n = FuseProgramCalls(fused, trial.metas, trial.types, session, dispatcher);
    if (n > 0) {
      fused.releases = PlanReleases(fused);
      absl::StatusOr<Steps> checked = RunSteps(session, dispatcher, fused, &trial.types, examples,
                                               /*commit=*/false, cancelled, limits, {});
      if (checked.ok()) {
        program->backward = std::move(checked->backward);
        program->peak_bytes = checked->peak_bytes;
        // Kept to run a failing run again, except in a program with collectives: there a rank
        // that ran them twice would pair its second run with its peers' next collectives.
        if (!HasCollective(spec)) {
          program->unfused = std::make_unique<ProgramSpec>(std::move(spec));
        }
        spec = std::move(fused);
        program->fused_calls = n;
      }
    }
  }
  // Numbers are made once, except where their op writes them.
  std::vector<std::vector<CallSpec>*> all = {&spec.calls, &spec.updates};
  if (program->unfused) {
    all.push_back(&program->unfused->calls);
    all.push_back(&program->unfused->updates);
  }
  for (std::vector<CallSpec>* calls : all) {
    for (CallSpec& c : *calls) {
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        const auto* s = std::get_if<OperandSpec::Scalar>(&c.inputs[i].source);
        const bool written = c.def == nullptr || (c.def->in_place && i == 0) ||
                             std::find(c.def->mutates_inputs.begin(), c.def->mutates_inputs.end(),
                                       static_cast<int>(i)) != c.def->mutates_inputs.end();
        if (s != nullptr && !written) c.inputs[i].number = NumberTensor(*s);
      }
    }
  }
  program->plans.calls.resize(spec.calls.size() + spec.updates.size());
  program->parameters = std::move(trial.types);
  program->outputs = std::move(trial.metas);
  program->spec = std::move(spec);
  return program;
}

absl::Status ChargeProgram(Program& program, const std::shared_ptr<MemoryAccount>& account,
                           int64_t bytes) {
  program.stored_hold.Set(account, bytes);
  if (!program.stored_hold.Hold()) {
    return QuotaRefusal(*account, bytes,
                        absl::StrCat("holding the program takes ", bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ProgramOutcome> RunProgram(Session& session, const Dispatcher& dispatcher,
                                          Program& program, const std::vector<OperandSpec>& inputs,
                                          const std::function<bool()>& cancelled,
                                          const ExecuteLimits& limits,
                                          const CallObserver& observe) {
  // The run allocates in the room the program holds for it, which it takes again after.
  program.peak_hold.Release();
  absl::Cleanup hold_again = [&program] { program.peak_hold.Hold(); };
  absl::StatusOr<Steps> steps =
      RunSteps(session, dispatcher, program.spec, &program.parameters, inputs,
               /*commit=*/true, cancelled, limits, observe, &program.plans, &program.backward);
  // A fused run that failed (rolled back) runs again as written, so that the failure names
  // the call, op and input the client wrote.
  if (!steps.ok() && program.unfused != nullptr && !absl::IsCancelled(steps.status()) &&
      !absl::IsDeadlineExceeded(steps.status())) {
    if (program.unfused_plans.calls.empty()) {
      program.unfused_plans.calls.resize(program.plans.calls.size());
    }
    steps = RunSteps(session, dispatcher, *program.unfused, &program.parameters, inputs,
                     /*commit=*/true, cancelled, limits, observe, &program.unfused_plans);
  }
  if (!steps.ok()) return steps.status();
  ++program.runs;
  return std::move(steps->outcome);
}

}  // namespace tensord
