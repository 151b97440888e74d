#include "server/service/program_memory_plan.h"

#include <algorithm>
#include <variant>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/service/program.h"

namespace tensord {

std::vector<std::vector<uint32_t>> PlanReleases(const ProgramSpec& spec) {
  const size_t n_forward = spec.calls.size();
  const size_t n = n_forward + spec.updates.size();
  auto call = [&](size_t k) -> const CallSpec& {
    return k < n_forward ? spec.calls[k] : spec.updates[k - n_forward];
  };
  std::vector<size_t> last(n);  // the last call that reads each call's outputs
  std::vector<bool> held(n, false);
  for (size_t k = 0; k < n; ++k) {
    const CallSpec& c = call(k);
    last[k] = std::max(last[k], k);
    held[k] = held[k] || c.keep || c.fetch || c.folded_into >= 0;
    for (const OperandSpec& operand : c.inputs) {
      const auto* out = std::get_if<OperandSpec::CallOutput>(&operand.source);
      if (out != nullptr && out->call < n) last[out->call] = std::max(last[out->call], k);
    }
  }
  for (const OperandSpec::CallOutput& root : spec.roots) {
    if (root.call < n) held[root.call] = true;
  }
  std::vector<std::vector<uint32_t>> releases(n);
  for (size_t j = 0; j < n; ++j) {
    if (!held[j]) releases[last[j]].push_back(static_cast<uint32_t>(j));
  }
  return releases;
}

absl::Status QuotaRefusal(const MemoryAccount& account, int64_t bytes, absl::string_view what) {
  return Error(
      Reason::kQuotaExceeded,
      absl::StrCat("program: ", what, ", which would exceed the memory quota (", account.used(),
                   " of ", account.quota(), " bytes in use); release tensors or programs"),
      {{"requested_bytes", absl::StrCat(bytes)},
       {"used_bytes", absl::StrCat(account.used())},
       {"quota_bytes", absl::StrCat(account.quota())}});
}

bool ChargeInPieces(MemoryAccount& account, int64_t bytes) {
  const int64_t piece = std::max<int64_t>(1, account.max_charge_bytes());
  int64_t charged = 0;
  while (charged < bytes) {
    const int64_t n = std::min(piece, bytes - charged);
    if (!account.Charge(n).ok()) {
      account.Credit(charged);
      return false;
    }
    charged += n;
  }
  return true;
}

void QuotaHold::Set(std::shared_ptr<MemoryAccount> account, int64_t bytes) {
  Release();
  account_ = std::move(account);
  bytes_ = std::max<int64_t>(0, bytes);
}

bool QuotaHold::Hold() {
  if (held_ || account_ == nullptr) return held_;
  held_ = ChargeInPieces(*account_, bytes_);
  return held_;
}

void QuotaHold::Release() {
  if (!held_) return;
  account_->Credit(bytes_);
  held_ = false;
}

}  // namespace tensord
