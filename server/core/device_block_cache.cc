#include "server/core/device_block_cache.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/core/host_memory.h"
#include "server/core/status.h"

namespace tensord {
namespace {

constexpr size_t kSmallestBlock = 512;

struct Registry {
  absl::Mutex mu;
  std::set<DeviceBlockCache*> caches ABSL_GUARDED_BY(mu);
};

Registry& Caches() {
  static auto* registry = new Registry;
  return *registry;
}

}  // namespace

DeviceBlockCache::DeviceBlockCache(RawAllocate allocate, RawFree free)
    : allocate_(std::move(allocate)), free_(std::move(free)) {
  absl::MutexLock lock(&Caches().mu);
  Caches().caches.insert(this);
}

DeviceBlockCache::~DeviceBlockCache() {
  {
    absl::MutexLock lock(&Caches().mu);
    Caches().caches.erase(this);
  }
  ReleaseAll();
}

size_t DeviceBlockCache::BlockSize(size_t bytes) {
  return host_memory::RoundToClass(bytes, kSmallestBlock);
}

absl::StatusOr<void*> DeviceBlockCache::Allocate(size_t bytes) {
  const size_t size = BlockSize(bytes);
  {
    absl::MutexLock lock(&mu_);
    auto it = cached_.find(size);
    if (it != cached_.end() && !it->second.empty()) {
      void* block = it->second.back().block;
      it->second.pop_back();
      stats_.cached_bytes -= size;
      ++stats_.reuses;
      return block;
    }
  }
  absl::StatusOr<void*> block = FromDriver(size);
  // The driver is out of memory, perhaps because of what is cached here: give it all back.
  if (!block.ok() && ReleaseAll() > 0) block = FromDriver(size);
  if (!block.ok()) return block.status();
  absl::MutexLock lock(&mu_);
  stats_.held_bytes += size;
  ++stats_.allocations;
  return *block;
}

void DeviceBlockCache::set_limit(size_t bytes, std::string device) {
  limit_ = bytes;
  device_ = std::move(device);
}

absl::StatusOr<void*> DeviceBlockCache::FromDriver(size_t size) {
  if (limit_ > 0) {
    size_t held = 0;
    {
      absl::MutexLock lock(&mu_);
      held = stats_.held_bytes;
    }
    if (held + size > limit_) {
      return Error(
          Reason::kOutOfMemory,
          absl::StrCat(device_, ": out of device memory (", size, " more bytes asked, ", held,
                       " held of the ", limit_, " this server may use, TENSORD_GPU_MEMORY_LIMIT)"),
          {{"device", device_}, {"bytes", std::to_string(size)}});
    }
  }
  return allocate_(size);
}

void DeviceBlockCache::Free(void* block, size_t bytes) {
  if (block == nullptr) return;
  const size_t size = BlockSize(bytes);
  absl::MutexLock lock(&mu_);
  cached_[size].push_back({block, absl::Now()});
  stats_.cached_bytes += size;
}

std::vector<DeviceBlockCache::Released> DeviceBlockCache::TakeFreedBefore(absl::Time cutoff) {
  std::vector<Released> out;
  absl::MutexLock lock(&mu_);
  for (auto it = cached_.begin(); it != cached_.end();) {
    std::vector<Cached>& blocks = it->second;
    auto keep = std::find_if(blocks.begin(), blocks.end(),
                             [cutoff](const Cached& c) { return c.freed > cutoff; });
    for (auto b = blocks.begin(); b != keep; ++b) out.push_back({b->block, it->first});
    blocks.erase(blocks.begin(), keep);
    it = blocks.empty() ? cached_.erase(it) : std::next(it);
  }
  for (const Released& r : out) {
    stats_.cached_bytes -= r.bytes;
    stats_.held_bytes -= r.bytes;
  }
  return out;
}

size_t DeviceBlockCache::GiveBack(const std::vector<Released>& blocks) {
  size_t bytes = 0;
  for (const Released& r : blocks) {
    free_(r.block, r.bytes);
    bytes += r.bytes;
  }
  return bytes;
}

size_t DeviceBlockCache::ReleaseIdle(absl::Duration idle) {
  return GiveBack(TakeFreedBefore(absl::Now() - idle));
}

size_t DeviceBlockCache::ReleaseAll() { return GiveBack(TakeFreedBefore(absl::InfiniteFuture())); }

DeviceBlockCache::Stats DeviceBlockCache::GetStats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

size_t DeviceBlockCache::ReleaseIdleEverywhere(absl::Duration idle) {
  absl::MutexLock lock(&Caches().mu);
  size_t bytes = 0;
  for (DeviceBlockCache* cache : Caches().caches) bytes += cache->ReleaseIdle(idle);
  return bytes;
}

DeviceBlockCache::Stats DeviceBlockCache::TotalStats() {
  absl::MutexLock lock(&Caches().mu);
  Stats total;
  for (const DeviceBlockCache* cache : Caches().caches) {
    const Stats s = cache->GetStats();
    total.cached_bytes += s.cached_bytes;
    total.held_bytes += s.held_bytes;
    total.reuses += s.reuses;
    total.allocations += s.allocations;
  }
  return total;
}

}  // namespace tensord
