// A program's memory plan. Compiling decides after which call each call's outputs are read
// no more, so that a run drops them there instead of holding every intermediate to its end;
// the trial run measures the bytes a run holds at its peak, which the program reports and
// holds of the session's quota for as long as it lives.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/core/tensor.h"

namespace tensord {

struct ProgramSpec;

// Per call (forward, then updates): the calls whose outputs nothing reads once it ran (no
// later call, backward root, fetch or keep). A call whose outputs nothing reads at all is
// listed after itself; kept, fetched and root calls are never listed.
std::vector<std::vector<uint32_t>> PlanReleases(const ProgramSpec& spec);

// The most bytes an account held above what it held when this was made, over the samples
// taken (a run samples after each call and after each op of its backward).
class PeakBytes {
 public:
  explicit PeakBytes(const MemoryAccount* account)
      : account_(account), base_(account ? account->used() : 0) {}
  void Sample() {
    if (account_ != nullptr) peak_ = std::max(peak_, account_->used() - base_);
  }
  int64_t peak() const { return peak_; }

 private:
  const MemoryAccount* account_;
  int64_t base_;
  int64_t peak_ = 0;
};

// Charges `bytes` to `account` in pieces of at most its per-tensor maximum (what is charged is
// not one tensor), all or nothing: false, with nothing charged, when the quota cannot hold them.
bool ChargeInPieces(MemoryAccount& account, int64_t bytes);

// QUOTA_EXCEEDED for a hold of `bytes` the account cannot take; `what` says what it is for
// ("holding the program takes N bytes").
absl::Status QuotaRefusal(const MemoryAccount& account, int64_t bytes, absl::string_view what);

// Bytes of an account's quota that are no tensor, held from Hold until Release or the hold's
// end. A compiled program holds two: its stored request, for as long as it lives, and the peak
// its trial run measured, so that other tensors of the session cannot take the room a run
// needs. A run gives the peak back while it allocates for real and takes it again after it;
// when it cannot (the run kept outputs, or other calls of the session took the room
// meanwhile), the program runs without that hold until a later run can take it again.
class QuotaHold {
 public:
  QuotaHold() = default;
  QuotaHold(const QuotaHold&) = delete;
  QuotaHold& operator=(const QuotaHold&) = delete;
  ~QuotaHold() { Release(); }

  // What to hold, and of which account; not held yet.
  void Set(std::shared_ptr<MemoryAccount> account, int64_t bytes);
  // Takes the bytes (again); false when the quota cannot hold them.
  bool Hold();
  void Release();
  bool held() const { return held_; }
  int64_t bytes() const { return bytes_; }

 private:
  std::shared_ptr<MemoryAccount> account_;
  int64_t bytes_ = 0;
  bool held_ = false;
};

}  // namespace tensord
