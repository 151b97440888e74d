// What a batch or a program run changes before it commits, so that a failure can put it
// back: the tape length of every context, and the prior bytes of every tensor an in-place op
// writes into. No gRPC here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/dispatch/dispatcher.h"
#include "server/service/session.h"

namespace tensord {

class Transaction {
 public:
  // Notes the tape length of every context of `session` (whose lock the caller holds).
  Transaction(Session& session, const Dispatcher& dispatcher);

  // Called before an in-place op runs on `target`.
  absl::Status SaveInPlaceTarget(const Tensor& target);

  // Restores every saved target (bytes and version) and truncates every tape back.
  void Rollback();

  // Commits the writes but drops the nodes recorded since the start: a program run whose
  // backward consumed the graph it recorded frees that graph here.
  void CommitDroppingRecorded();

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

}  // namespace tensord
