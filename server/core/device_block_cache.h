// A caching allocator for a device's memory, for every accelerator runtime.
//
// A training step allocates the same tensor sizes every step; asking the driver for each
// (clCreateBuffer, cudaMalloc) costs a call into it, often a synchronisation, and memory the
// driver must map. So freed blocks are kept in size classes and handed out again. Each
// runtime runs a device's work on in-order queues and frees a block only once no later work
// names it, so a block freed while kernels that read it are still queued can be reused by the
// next allocation: whatever writes it is queued after them. Blocks nobody reused for a while go
// back to the driver (the session reaper calls ReleaseIdleEverywhere), and when the driver
// refuses an allocation the cache gives back everything and asks once more.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tensord {

class DeviceBlockCache {
 public:
  // The driver's allocation and release of a block of exactly `bytes` (a size class).
  using RawAllocate = std::function<absl::StatusOr<void*>(size_t bytes)>;
  using RawFree = std::function<void(void* block, size_t bytes)>;

  struct Stats {
    size_t cached_bytes = 0;  // freed, kept for reuse
    size_t held_bytes = 0;    // allocated from the driver: in use or cached
    size_t reuses = 0;        // allocations served from the cache
    size_t allocations = 0;   // allocations the driver made
  };

  // Registers the cache, so ReleaseIdleEverywhere and TotalStats see it.
  DeviceBlockCache(RawAllocate allocate, RawFree free);
  // Gives every cached block back to the driver (blocks in use must have been freed).
  ~DeviceBlockCache();
  DeviceBlockCache(const DeviceBlockCache&) = delete;
  DeviceBlockCache& operator=(const DeviceBlockCache&) = delete;

  // Caps the bytes held from the driver (in use and cached) at `bytes` (0: the driver's own
  // limit): an allocation beyond it is refused as the driver would refuse it, OUT_OF_MEMORY
  // naming `device`, once the cache gave back what it held. The accelerator runtimes set it
  // from TENSORD_GPU_MEMORY_LIMIT (a device of less memory, for tests and shared machines).
  void set_limit(size_t bytes, std::string device);

  // A block of at least `bytes` (> 0) bytes: a cached one of its size class, or the driver's.
  // The driver's error (OUT_OF_MEMORY) when it refuses even after the cache was emptied.
  absl::StatusOr<void*> Allocate(size_t bytes);
  // Returns a block of Allocate(bytes), same `bytes`, for reuse.
  void Free(void* block, size_t bytes);
  // Gives back the cached blocks freed at least `idle` ago; returns their bytes.
  size_t ReleaseIdle(absl::Duration idle);
  size_t ReleaseAll();
  Stats GetStats() const;

  // The size class a request of `bytes` is served from: at least 512 bytes, at most a quarter
  // above the request.
  static size_t BlockSize(size_t bytes);
  // ReleaseIdle on every cache of the process; returns the bytes given back.
  static size_t ReleaseIdleEverywhere(absl::Duration idle);
  // The sum of every cache's stats.
  static Stats TotalStats();

 private:
  struct Cached {
    void* block;
    absl::Time freed;
  };
  struct Released {
    void* block;
    size_t bytes;
  };
  // A new block of `size` from the driver, within the limit.
  absl::StatusOr<void*> FromDriver(size_t size);
  // Takes the blocks freed at or before `cutoff` out of the cache, for the driver.
  std::vector<Released> TakeFreedBefore(absl::Time cutoff);
  size_t GiveBack(const std::vector<Released>& blocks);

  const RawAllocate allocate_;
  const RawFree free_;
  size_t limit_ = 0;
  std::string device_;
  mutable absl::Mutex mu_;
  // By size class, oldest first: reuse takes the newest, release the oldest.
  std::map<size_t, std::vector<Cached>> cached_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tensord
