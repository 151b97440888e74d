#include "server/core/device_stream_order.h"

namespace tensord {

absl::Status DeviceStreamOrder::Take(uint64_t& last, uint64_t stream) {
  if (last == stream) return absl::OkStatus();
  absl::Status waited = wait_(last, stream);
  if (!waited.ok()) return waited;
  last = stream;
  return absl::OkStatus();
}

absl::Status DeviceStreamOrder::Allocated(const void* block, uint64_t stream) {
  if (block == nullptr) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  auto [it, added] = last_stream_.try_emplace(block, stream);
  if (added) return absl::OkStatus();
  return Take(it->second, stream);
}

absl::Status DeviceStreamOrder::Use(absl::Span<const void* const> blocks, uint64_t stream) {
  absl::MutexLock lock(&mu_);
  for (const void* block : blocks) {
    auto it = last_stream_.find(block);
    if (it == last_stream_.end()) continue;
    absl::Status taken = Take(it->second, stream);
    if (!taken.ok()) return taken;
  }
  return absl::OkStatus();
}

void DeviceStreamOrder::Forget(const void* block) {
  absl::MutexLock lock(&mu_);
  last_stream_.erase(block);
}

size_t DeviceStreamOrder::tracked() const {
  absl::MutexLock lock(&mu_);
  return last_stream_.size();
}

}  // namespace tensord
