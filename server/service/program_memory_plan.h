// A program's memory plan. Compiling decides after which call each call's outputs are read
// no more, so that a run drops them there instead of holding every intermediate to its end;
// and the trial run measures the bytes a run holds at its peak, which the program reports.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

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

}  // namespace tensord
