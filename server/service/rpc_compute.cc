// Execute, autodiff contexts and Backward.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/dispatch/gradient_reduction.h"
#include "server/service/convert.h"
#include "server/service/execute.h"
#include "server/service/service_core.h"

namespace tensord {
namespace {

CallEnv SessionEnv(Session& session, const ServiceCore::Cancelled& cancelled) {
  return BatchEnv(session, /*no_grad=*/false, cancelled);
}

}  // namespace

absl::Status ServiceCore::Execute(const v1::ExecuteRequest& req, const Cancelled& cancelled,
                                  v1::ExecuteResponse* resp) {
  // Both refused before the request is converted (which copies every call).
  if (const int64_t size = static_cast<int64_t>(req.ByteSizeLong());
      size > config_.max_message_bytes) {
    return LimitError("execute", "max_message_bytes", size, config_.max_message_bytes,
                      "request bytes");
  }
  if (req.calls_size() > config_.limits.max_calls_per_batch) {
    return LimitError("execute", "max_calls_per_batch", req.calls_size(),
                      config_.limits.max_calls_per_batch, "calls in the batch");
  }
  BatchSpec batch;
  ASSIGN_OR_RETURN(batch, BatchFromProto(req));
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  absl::MutexLock lock(&session->mu());
  RETURN_IF_ERROR(session->CheckLive());
  const ExecuteLimits limits = BatchLimits();
  std::vector<CallOutcome> outcomes;
  const std::string& device = session->device();
  OpTimings timings;
  auto observe = [&timings](const CallSpec& call, absl::Duration took) {
    timings.Add(call.op, took);
  };
  absl::StatusOr<std::vector<CallOutcome>> ran =
      ExecuteBatch(*session, dispatcher_, batch, cancelled, limits, observe, config_.fusion);
  metrics_.RecordOps(timings, device);
  ASSIGN_OR_RETURN(outcomes, std::move(ran));
  for (CallOutcome& outcome : outcomes) {
    v1::CallResult* result = resp->add_results();
    for (size_t i = 0; i < outcome.outputs.size(); ++i) {
      const StoredTensor& out = outcome.outputs[i];
      if (out.handle != 0) FillTensorInfo(out.handle, out.tensor, result->add_outputs());
      if (i < outcome.fetched.size()) {
        FillTensorData(out.tensor, std::move(outcome.fetched[i]), result->add_values());
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ServiceCore::OpenAutodiffContext(const v1::OpenAutodiffContextRequest& req,
                                              v1::OpenAutodiffContextResponse* resp) {
  Checkpointing checkpointing;
  ASSIGN_OR_RETURN(checkpointing, CheckpointingFromProto(req.checkpointing()));
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  absl::MutexLock lock(&session->mu());
  RETURN_IF_ERROR(session->CheckLive());
  int64_t open = 0;
  for (const AutodiffContext* ctx : session->contexts()) {
    open += ctx->state() == ContextState::kOpen;
  }
  if (open >= config_.limits.max_contexts_per_session) {
    return WithMetadata(
        LimitError("autodiff", "max_contexts_per_session", open + 1,
                   config_.limits.max_contexts_per_session, "open contexts with this one"),
        {{"session_id", session->id()}});
  }
  uint64_t id;
  ASSIGN_OR_RETURN(id, session->OpenContext(checkpointing));
  resp->set_context_id(id);
  return absl::OkStatus();
}

absl::Status ServiceCore::CloseAutodiffContext(const v1::CloseAutodiffContextRequest& req,
                                               v1::CloseAutodiffContextResponse*) {
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  absl::MutexLock lock(&session->mu());
  RETURN_IF_ERROR(session->CheckLive());
  return session->CloseContext(req.context_id());
}

absl::Status ServiceCore::Backward(const v1::BackwardRequest& req, const Cancelled& cancelled,
                                   v1::BackwardResponse* resp) {
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  absl::MutexLock lock(&session->mu());
  RETURN_IF_ERROR(session->CheckLive());
  const std::string ctx_id = absl::StrCat(req.context_id());
  const CallEnv env = SessionEnv(*session, cancelled);
  AutodiffContext* ctx = nullptr;
  auto walk = [&](LeafGradientSink* sink) -> absl::StatusOr<std::vector<LeafGradient>> {
    if (!session->autodiff_enabled()) {
      return Error(Reason::kAutodiffContextNotEnabled,
                   absl::StrCat("autodiff: backward in session ", session->id(),
                                ", which was created with autodiff disabled"),
                   {{"context_id", ctx_id}, {"context_state", "disabled"}});
    }
    ASSIGN_OR_RETURN(ctx, session->FindContext(req.context_id()));
    if (req.seeds_size() != 0 && req.seeds_size() != req.roots_size()) {
      return Error(Reason::kInvalidRequest,
                   absl::StrCat("autodiff: ", req.seeds_size(), " seeds for ", req.roots_size(),
                                " roots; give one seed per root or none"),
                   {{"field", "seeds"}, {"context_id", ctx_id}});
    }
    if (req.roots_size() == 0) {
      return Error(Reason::kInvalidRequest, "autodiff: backward needs at least one root",
                   {{"field", "roots"}, {"context_id", ctx_id}});
    }
    std::vector<Tensor> roots, seeds;
    for (int r = 0; r < req.roots_size(); ++r) {
      auto t = session->Get(req.roots(r));
      if (!t.ok()) return WithMetadata(t.status(), {{"root_index", absl::StrCat(r)}});
      roots.push_back(*std::move(t));
    }
    for (int r = 0; r < req.seeds_size(); ++r) {
      auto t = session->Get(req.seeds(r));
      if (!t.ok()) return WithMetadata(t.status(), {{"seed_index", absl::StrCat(r)}});
      // A seed is a value: using an autodiff tensor as one must not tie it to a tape.
      seeds.push_back(t->Detached());
    }
    return dispatcher_.Backward(*ctx, roots, seeds, req.retain_graph(), env, sink);
  };
  std::vector<LeafGradient> grads;
  if (!req.has_reduce()) {
    ASSIGN_OR_RETURN(grads, walk(nullptr));
  } else {
    // Reduced across the group as the backward makes them. Whatever fails here, or on a
    // peer, fails every rank alike (gradient_reduction.h).
    GradientReduction reduction(dispatcher_, env, GradientReductionFromProto(req.reduce()),
                                req.context_id(), [&](uint64_t h) { return session->Get(h); });
    auto walked = walk(&reduction);
    ASSIGN_OR_RETURN(auto reduced, reduction.Finish(walked.status()));
    grads = *std::move(walked);
    for (auto& reduced_leaf : reduced) {
      const uint64_t leaf = reduced_leaf.first;
      auto it = std::find_if(grads.begin(), grads.end(),
                             [leaf](const LeafGradient& g) { return g.leaf->tensor_id == leaf; });
      if (it != grads.end()) {
        it->grad = std::move(reduced_leaf.second);
      } else {  // not reached here: the group's sum of zeros and the peers' gradients
        ASSIGN_OR_RETURN(Tensor t, session->Get(leaf));
        grads.push_back({t.autograd(), std::move(reduced_leaf.second)});
      }
    }
  }
  metrics_.RecordBackward("walk");
  std::sort(grads.begin(), grads.end(), [](const LeafGradient& a, const LeafGradient& b) {
    return a.leaf->tensor_id < b.leaf->tensor_id;
  });
  for (LeafGradient& g : grads) {
    Tensor grad = g.grad.Detached();
    const uint64_t handle = session->Store(grad);
    session->AddGradientHandle(ctx->id(), handle);
    v1::Gradient* out = resp->add_gradients();
    out->set_leaf(g.leaf->tensor_id);
    FillTensorInfo(handle, grad, out->mutable_grad());
  }
  return absl::OkStatus();
}

}  // namespace tensord
