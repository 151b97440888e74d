// Gradients, AutodiffContext and NoGradGuard.
#include "absl/strings/str_cat.h"
#include "client/cpp/internal.h"
#include "client/cpp/session.h"
#include "client/cpp/status.h"

namespace tensord::client {

// ---- Gradients, AutodiffContext, NoGradGuard --------------------------------------------------

Tensor Gradients::grad(const Tensor& leaf) const {
  auto it = by_leaf_.find(leaf.handle());
  return it == by_leaf_.end() ? Tensor() : it->second;
}

AutodiffContext::AutodiffContext(std::shared_ptr<internal::SessionState> state, uint64_t id,
                                 Checkpointing checkpointing)
    : state_(std::move(state)), id_(id), checkpointing_(checkpointing) {}

AutodiffContext::AutodiffContext(AutodiffContext&& other) noexcept
    : state_(std::move(other.state_)),
      id_(other.id_),
      checkpointing_(other.checkpointing_),
      closed_(other.closed_),
      gradient_handles_(std::move(other.gradient_handles_)) {
  other.state_ = nullptr;
}

AutodiffContext& AutodiffContext::operator=(AutodiffContext&& other) noexcept {
  if (this != &other) {
    Close().IgnoreError();
    state_ = std::move(other.state_);
    other.state_ = nullptr;
    id_ = other.id_;
    checkpointing_ = other.checkpointing_;
    closed_ = other.closed_;
    gradient_handles_ = std::move(other.gradient_handles_);
  }
  return *this;
}

AutodiffContext::~AutodiffContext() { Close().IgnoreError(); }

absl::StatusOr<Gradients> AutodiffContext::Backward(const std::vector<Tensor>& roots,
                                                    const std::vector<Tensor>& seeds,
                                                    bool retain_graph) {
  return Run(roots, seeds, retain_graph, nullptr);
}

absl::StatusOr<Gradients> AutodiffContext::Backward(const std::vector<Tensor>& roots,
                                                    const GradientReduction& reduce,
                                                    const std::vector<Tensor>& seeds,
                                                    bool retain_graph) {
  return Run(roots, seeds, retain_graph, &reduce);
}

absl::StatusOr<Gradients> AutodiffContext::Run(const std::vector<Tensor>& roots,
                                               const std::vector<Tensor>& seeds, bool retain_graph,
                                               const GradientReduction* reduce) {
  if (!state_) return internal::NoSession();
  if (absl::Status s = state_->CheckOpen(); !s.ok()) return s;
  ::tensord::v1::BackwardRequest request;
  request.set_session_id(state_->id());
  request.set_context_id(id_);
  // Roots and seeds are named as the server names them: root_index, seed_index.
  for (size_t i = 0; i < roots.size(); ++i) {
    absl::StatusOr<uint64_t> h =
        internal::HandleIn(*state_, roots[i], {{"root_index", absl::StrCat(i)}});
    if (!h.ok()) return h.status();
    request.add_roots(*h);
  }
  for (size_t i = 0; i < seeds.size(); ++i) {
    absl::StatusOr<uint64_t> h =
        internal::HandleIn(*state_, seeds[i], {{"seed_index", absl::StrCat(i)}});
    if (!h.ok()) return h.status();
    request.add_seeds(*h);
  }
  if (reduce != nullptr) {
    ::tensord::v1::GradientReduction* r = request.mutable_reduce();
    r->set_op(reduce->op);
    for (size_t b = 0; b < reduce->buckets.size(); ++b) {
      ::tensord::v1::GradientBucket* bucket = r->add_buckets();
      for (const Tensor& leaf : reduce->buckets[b]) {
        absl::StatusOr<uint64_t> h =
            internal::HandleIn(*state_, leaf, {{"bucket_index", absl::StrCat(b)}});
        if (!h.ok()) return h.status();
        bucket->add_leaves(*h);
      }
    }
  }
  grpc::ClientContext context;
  state_->Prepare(&context);
  request.set_retain_graph(retain_graph);
  ::tensord::v1::BackwardResponse response;
  grpc::Status status = state_->stub().Backward(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  Gradients out;
  for (const ::tensord::v1::Gradient& g : response.gradients()) {
    out.by_leaf_[g.leaf()] = Tensor::Adopt(state_, TensorInfo::FromProto(g.grad()));
    gradient_handles_.push_back(g.grad().handle());
  }
  return out;
}

absl::Status AutodiffContext::Close() {
  if (!state_ || closed_ || state_->closed()) return absl::OkStatus();
  grpc::ClientContext context;
  state_->Prepare(&context);
  ::tensord::v1::CloseAutodiffContextRequest request;
  request.set_session_id(state_->id());
  request.set_context_id(id_);
  ::tensord::v1::CloseAutodiffContextResponse response;
  grpc::Status status = state_->stub().CloseAutodiffContext(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  closed_ = true;
  // Closing freed the context's gradients on the server.
  state_->ForgetHandles(gradient_handles_);
  gradient_handles_.clear();
  return absl::OkStatus();
}

NoGradGuard::NoGradGuard(std::shared_ptr<internal::SessionState> state) : state_(std::move(state)) {
  if (state_) state_->EnterNoGrad();
}

NoGradGuard::~NoGradGuard() {
  if (state_) state_->ExitNoGrad();
}

}  // namespace tensord::client
