// The queues a device runtime makes for streams (core/stream_scope.h): one per stream that
// enqueued work on the device, from its first work until the stream ends. `Queue` is the
// vendor's handle (an OpenCL command queue, a CUDA stream); this header names no vendor type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/core/status.h"

namespace tensord::gpu {

template <typename Queue>
class StreamQueues {
 public:
  // The queue of `stream`, made by `make()` (an absl::StatusOr<Queue>) the first time.
  template <typename Make>
  absl::StatusOr<Queue> Get(uint64_t stream, Make make) {
    absl::MutexLock lock(&mu_);
    auto it = queues_.find(stream);
    if (it != queues_.end()) return it->second;
    ASSIGN_OR_RETURN(Queue made, make());
    queues_.emplace(stream, made);
    return made;
  }

  // Calls `use(queue)` with the queue of `stream`, which cannot end meanwhile; false, without
  // calling it, when the stream has no queue (it ended, and its work is done).
  template <typename Use>
  bool With(uint64_t stream, Use use) {
    absl::MutexLock lock(&mu_);
    auto it = queues_.find(stream);
    if (it == queues_.end()) return false;
    use(it->second);
    return true;
  }

  // Calls `use(queue)` for every queue, none of which can end meanwhile.
  template <typename Use>
  void ForEach(Use use) {
    absl::MutexLock lock(&mu_);
    for (auto& [stream, queue] : queues_) use(queue);
  }

  // Ends `stream`. Once its queue is gone, a stream taking over a block this one named last
  // waits for nothing: so `finish(queue)` runs first, while the queue is still found (a stream
  // that orders itself after this one meanwhile waits behind that work); then the queue is
  // forgotten and `release(queue)`.
  template <typename Finish, typename Release>
  void End(uint64_t stream, Finish finish, Release release) {
    Queue queue{};
    if (!With(stream, [&](Queue q) { queue = q; })) return;
    finish(queue);
    {
      absl::MutexLock lock(&mu_);
      queues_.erase(stream);
    }
    release(queue);
  }

  size_t size() const {
    absl::MutexLock lock(&mu_);
    return queues_.size();
  }

  // Every queue, forgotten: the caller releases them.
  std::vector<Queue> TakeAll() {
    absl::MutexLock lock(&mu_);
    std::vector<Queue> out;
    for (auto& [stream, queue] : queues_) out.push_back(queue);
    queues_.clear();
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Queue> queues_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tensord::gpu
