#include "server/service/transaction.h"

#include "server/core/status.h"

namespace tensord {

Transaction::Transaction(Session& session, const Dispatcher& dispatcher) : dispatcher_(dispatcher) {
  for (const AutodiffContext* c : session.contexts()) {
    AutodiffContext* ctx = session.LookupContext(c->id());
    tapes_.emplace_back(ctx, ctx->tape_size());
  }
}

absl::Status Transaction::SaveInPlaceTarget(const Tensor& target) {
  if (!target.defined() || target.storage() == nullptr) return absl::OkStatus();
  // A host tensor, so the copy comes from the pooled host memory: an optimizer step saves
  // every parameter and state tensor it writes, and fresh pages for those copies cost more
  // than the step itself (a page fault each).
  ASSIGN_OR_RETURN(Tensor copy, Tensor::Empty(target.dtype(), target.shape()));
  if (target.nbytes() > 0) RETURN_IF_ERROR(dispatcher_.ToHost(target, copy.raw()));
  undo_.push_back(Undo{target, std::move(copy), target.storage()->version()});
  return absl::OkStatus();
}

void Transaction::Rollback() {
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

void Transaction::CommitDroppingRecorded() {
  undo_.clear();
  for (auto& [ctx, size] : tapes_) ctx->TruncateTape(size);
}

}  // namespace tensord
