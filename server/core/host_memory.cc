#include "server/core/host_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace tensord::host_memory {
namespace {

// The sanitizers see heap errors (use after free, overflow, leaks) in malloc'd memory only, so
// their builds malloc every block.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kPool = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
constexpr bool kPool = false;
#else
constexpr bool kPool = true;
#endif
#else
constexpr bool kPool = true;
#endif

struct CachedBlock {
  void* block;
  absl::Time freed;
};

struct Pool {
  absl::Mutex mu;
  // By size class, oldest first: reuse takes the newest (its pages are likely still in cache),
  // release takes the oldest.
  std::map<size_t, std::vector<CachedBlock>> cached ABSL_GUARDED_BY(mu);
  Stats stats ABSL_GUARDED_BY(mu);
};

Pool& ThePool() {
  static auto* pool = new Pool;
  return *pool;
}

void* Map(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

struct Unmapped {
  void* block;
  size_t bytes;
};

// Takes the cached blocks freed at or before `cutoff` out of the pool; the caller unmaps them
// outside the lock.
std::vector<Unmapped> TakeFreedBefore(absl::Time cutoff) {
  std::vector<Unmapped> out;
  Pool& pool = ThePool();
  absl::MutexLock lock(&pool.mu);
  for (auto it = pool.cached.begin(); it != pool.cached.end();) {
    std::vector<CachedBlock>& blocks = it->second;
    auto keep = std::find_if(blocks.begin(), blocks.end(),
                             [cutoff](const CachedBlock& b) { return b.freed > cutoff; });
    for (auto b = blocks.begin(); b != keep; ++b) out.push_back({b->block, it->first});
    blocks.erase(blocks.begin(), keep);
    it = blocks.empty() ? pool.cached.erase(it) : std::next(it);
  }
  for (const Unmapped& u : out) {
    pool.stats.cached_bytes -= u.bytes;
    pool.stats.mapped_bytes -= u.bytes;
  }
  return out;
}

size_t Unmap(const std::vector<Unmapped>& blocks) {
  size_t bytes = 0;
  for (const Unmapped& u : blocks) {
    munmap(u.block, u.bytes);
    bytes += u.bytes;
  }
  return bytes;
}

}  // namespace

bool Pooled() { return kPool; }

size_t RoundToClass(size_t bytes, size_t smallest) {
  if (bytes <= smallest) return smallest;
  const int top = 63 - __builtin_clzll(bytes);  // 2^top <= bytes < 2^(top+1)
  const size_t step = size_t{1} << (top - 2);
  return (bytes + step - 1) / step * step;
}

// From 64 KiB every class is a multiple of 16 KiB (whole pages).
size_t SizeClass(size_t bytes) { return RoundToClass(bytes, kPooledBytes); }

void* Allocate(size_t bytes) {
  if (!kPool || bytes < kPooledBytes) {
    // aligned_alloc wants a multiple of the alignment; never zero bytes.
    return std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
  }
  const size_t size = SizeClass(bytes);
  Pool& pool = ThePool();
  {
    absl::MutexLock lock(&pool.mu);
    auto it = pool.cached.find(size);
    if (it != pool.cached.end() && !it->second.empty()) {
      void* block = it->second.back().block;
      it->second.pop_back();
      pool.stats.cached_bytes -= size;
      ++pool.stats.reuses;
      return block;
    }
  }
  void* block = Map(size);
  if (block == nullptr && ReleaseAll() > 0) block = Map(size);
  if (block == nullptr) return nullptr;
  absl::MutexLock lock(&pool.mu);
  pool.stats.mapped_bytes += size;
  ++pool.stats.maps;
  return block;
}

void Free(void* block, size_t bytes) {
  if (block == nullptr) return;
  if (!kPool || bytes < kPooledBytes) {
    std::free(block);
    return;
  }
  const size_t size = SizeClass(bytes);
  Pool& pool = ThePool();
  absl::MutexLock lock(&pool.mu);
  pool.cached[size].push_back({block, absl::Now()});
  pool.stats.cached_bytes += size;
}

size_t ReleaseIdle(absl::Duration idle) { return Unmap(TakeFreedBefore(absl::Now() - idle)); }

size_t ReleaseAll() { return Unmap(TakeFreedBefore(absl::InfiniteFuture())); }

Stats GetStats() {
  Pool& pool = ThePool();
  absl::MutexLock lock(&pool.mu);
  return pool.stats;
}

}  // namespace tensord::host_memory
