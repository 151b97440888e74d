// The process's cache of oneDNN primitives, by key (onednn_common.h: GetCachedPrimitive).
//
// The entries are sharded by the key's hash, so that lookups of different primitives from
// different threads take different locks: no call takes a process-wide mutex. Each lookup
// stamps its entry from one process-wide counter, so the stamps order every use; an insert
// beyond the capacity evicts the entry with the oldest stamp, the least recently used of all
// shards. Inserts follow misses, which build a primitive (JIT compilation, milliseconds), so
// the eviction's scan of every entry is rare and small beside them.
#include <omp.h>

#include <array>
#include <atomic>
#include <functional>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "server/backends/cpu/onednn_common.h"

namespace tensord::cpu::onednn {
namespace {

constexpr size_t kShards = 16;

struct Entry {
  std::shared_ptr<const CachedPrimitive> primitive;
  uint64_t last_use = 0;
};

struct Shard {
  std::mutex mu;
  std::unordered_map<std::string, Entry> map;
  int64_t hits = 0, misses = 0;
};

class PrimitiveCache {
 public:
  std::shared_ptr<const CachedPrimitive> Find(const std::string& key) {
    Shard& s = For(key);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) {
      ++s.misses;
      return nullptr;
    }
    ++s.hits;
    it->second.last_use = Tick();
    return it->second.primitive;
  }

  std::shared_ptr<const CachedPrimitive> Insert(const std::string& key,
                                                std::shared_ptr<const CachedPrimitive> p) {
    {
      Shard& s = For(key);
      std::lock_guard<std::mutex> lock(s.mu);
      auto [it, added] = s.map.try_emplace(key, Entry{p, Tick()});
      // Another thread built the same primitive meanwhile: keep one.
      if (!added) return it->second.primitive;
      size_.fetch_add(1, std::memory_order_relaxed);
    }
    Evict();
    return p;
  }

  void SetCapacity(size_t capacity) {
    capacity_.store(capacity, std::memory_order_relaxed);
    Evict();
  }

  CacheStats Stats() {
    CacheStats stats;
    for (Shard& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mu);
      stats.hits += s.hits;
      stats.misses += s.misses;
      stats.size += static_cast<int64_t>(s.map.size());
    }
    stats.capacity = static_cast<int64_t>(capacity_.load(std::memory_order_relaxed));
    return stats;
  }

  void Clear() {
    std::lock_guard<std::mutex> evicting(evict_mu_);
    for (Shard& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mu);
      size_.fetch_sub(s.map.size(), std::memory_order_relaxed);
      s.map.clear();
    }
  }

 private:
  Shard& For(const std::string& key) { return shards_[std::hash<std::string>{}(key) % kShards]; }
  uint64_t Tick() { return clock_.fetch_add(1, std::memory_order_relaxed); }

  // Drops the least recently used entries while there are more than the capacity.
  void Evict() {
    std::lock_guard<std::mutex> evicting(evict_mu_);
    while (size_.load(std::memory_order_relaxed) > capacity_.load(std::memory_order_relaxed)) {
      Shard* oldest = nullptr;
      std::string oldest_key;
      uint64_t oldest_use = std::numeric_limits<uint64_t>::max();
      for (Shard& s : shards_) {
        std::lock_guard<std::mutex> lock(s.mu);
        for (const auto& [key, entry] : s.map) {
          if (entry.last_use < oldest_use) {
            oldest = &s;
            oldest_key = key;
            oldest_use = entry.last_use;
          }
        }
      }
      if (oldest == nullptr) return;
      std::lock_guard<std::mutex> lock(oldest->mu);
      auto it = oldest->map.find(oldest_key);
      // Used since the scan: no longer the oldest, so scan again.
      if (it == oldest->map.end() || it->second.last_use != oldest_use) continue;
      oldest->map.erase(it);
      size_.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  std::array<Shard, kShards> shards_;
  std::atomic<uint64_t> clock_{0};
  std::atomic<size_t> size_{0};
  std::atomic<size_t> capacity_{kDefaultCacheCapacity};
  std::mutex evict_mu_;  // one eviction (or clear) at a time
};

PrimitiveCache& Cache() {
  static PrimitiveCache* cache = new PrimitiveCache();
  return *cache;
}

}  // namespace

std::shared_ptr<const CachedPrimitive> GetCachedPrimitive(
    const std::string& key, const std::function<CachedPrimitive()>& make) {
  if (auto hit = Cache().Find(key)) return hit;
  // Built outside the locks: creating a primitive JIT-compiles code and can take milliseconds.
  CachedPrimitive made = make();
  // oneDNN divides a primitive's work among the threads of the team it is built under: one
  // worth fewer threads is built again under a team of that many.
  const int threads = PrimitiveThreads(made.pd);
  if (threads < omp_get_max_threads()) {
    const TeamScope team(threads);
    made = make();
    made.threads = threads;
  }
  auto built = std::make_shared<const CachedPrimitive>(std::move(made));
  return Cache().Insert(key, std::move(built));
}

CacheStats GetCacheStats() { return Cache().Stats(); }
void ClearCache() { Cache().Clear(); }
void SetCacheCapacity(size_t capacity) { Cache().SetCapacity(capacity); }

}  // namespace tensord::cpu::onednn
