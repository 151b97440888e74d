// Host memory for tensor storage.
//
// A training step allocates the same tensor sizes every step. Fresh pages cost a page fault
// each, so large blocks are kept for reuse when freed; blocks nobody reused for a while go back
// to the operating system, so a server's memory comes back after load. glibc does not give
// that back by itself: it keeps the tops of its per-thread arenas and raises its mmap threshold
// past tensor sizes. So tensors of at least kPooledBytes are mmap'd pages in size classes,
// cached here, whichever malloc the server is built with (process_malloc.h); smaller ones come
// from malloc. Under glibc's, whose thresholds are fixed (process_malloc::Configure) so the
// arenas stay bounded, the pool starts below the mmap threshold: a block between the two would
// come from an arena top that malloc trims when it is freed, fresh pages on every call.
#pragma once

#include <cstddef>

#include "absl/time/time.h"

namespace tensord::host_memory {

// Smallest block that is pooled; smaller ones are malloc'd.
inline constexpr size_t kPooledBytes = size_t{64} << 10;
// glibc malloc's mmap and trim thresholds (process_malloc::Configure). gRPC's message buffers (1
// MiB chunks and their framing) stay below the first, so they come from the arenas; the second
// keeps a few of them at an arena's top between messages. With both at 256 KiB every buffer was
// fresh pages and a 256 MiB put+get from C++ ran at 136-169 MiB/s (a page fault per 4 KiB moved);
// at 4 and 16 MiB it runs at 1.4-1.6 GiB/s (bench/service_bench, docs/performance.md).
inline constexpr size_t kMallocMmapThresholdBytes = size_t{4} << 20;
inline constexpr size_t kMallocTrimThresholdBytes = size_t{16} << 20;

// A 64-byte aligned block of at least `bytes` bytes, or nullptr when the system has no memory
// (after cached blocks were released and the allocation retried).
void* Allocate(size_t bytes);
// Returns a block of Allocate(bytes), same `bytes`.
void Free(void* block, size_t bytes);

// Releases cached blocks that were freed at least `idle` ago; returns the bytes released.
// The session reaper calls it every round, so a burst of load costs memory only briefly.
size_t ReleaseIdle(absl::Duration idle);
// Releases every cached block.
size_t ReleaseAll();

struct Stats {
  size_t cached_bytes = 0;  // freed, kept for reuse
  size_t mapped_bytes = 0;  // pooled blocks in use or cached
  size_t reuses = 0;        // allocations served from the cache
  size_t maps = 0;          // allocations that mapped fresh pages
};
Stats GetStats();

// False in sanitizer builds, which malloc every block so that they see its use.
bool Pooled();

// The size class a request of `bytes` is served from (exposed for tests).
size_t SizeClass(size_t bytes);
// Four size classes per power of two, at least `smallest` (a power of two): at most 25 % above
// the request, and few distinct sizes to cache. The host pool's and the device block cache's.
size_t RoundToClass(size_t bytes, size_t smallest);

}  // namespace tensord::host_memory
