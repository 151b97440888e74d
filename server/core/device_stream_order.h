// Ordering between the streams of one device (stream_scope.h), for every accelerator runtime.
//
// A runtime runs each stream on an in-order queue of its own, so work of two streams may run in
// any order. Within a session that is right: its tensors are named by its own stream only. Two
// things cross streams: a freed block that the block cache hands out to another session, and a
// tensor a call names from another stream than the one that made it (a transfer finished on
// the default stream, a test). So the order records, for each block of the device's memory,
// the stream that named it last; a stream about to name a block another stream named last
// first makes its queue wait for everything that stream enqueued so far (an OpenCL marker and
// barrier, a CUDA event), without blocking the host.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace tensord {

class DeviceStreamOrder {
 public:
  // Makes stream `to`'s queue wait for everything stream `from` enqueued so far. A stream that
  // ended has no queue any more and nothing left to wait for.
  using Wait = std::function<absl::Status(uint64_t from, uint64_t to)>;

  explicit DeviceStreamOrder(Wait wait) : wait_(std::move(wait)) {}
  DeviceStreamOrder(const DeviceStreamOrder&) = delete;
  DeviceStreamOrder& operator=(const DeviceStreamOrder&) = delete;

  // A block handed out to `stream` (new from the driver, or reused from the cache): tracked
  // from now on, and ordered after the stream that named it last.
  absl::Status Allocated(const void* block, uint64_t stream);
  // Before `stream` enqueues work naming `blocks`: ordered after the other streams that named
  // them last. Blocks never allocated here (constants, null) are not tracked.
  absl::Status Use(absl::Span<const void* const> blocks, uint64_t stream);
  absl::Status Use(const void* block, uint64_t stream) { return Use({&block, 1}, stream); }
  // The driver took the block back: its handle may name a new buffer later.
  void Forget(const void* block);
  // Blocks tracked now (the memory a test may check is given back).
  size_t tracked() const;

 private:
  // Orders `stream` after the last user of `*last` and makes it the last.
  absl::Status Take(uint64_t& last, uint64_t stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Wait wait_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<const void*, uint64_t> last_stream_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tensord
