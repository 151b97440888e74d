// Streams: the ordered runs of device work that calls may overlap with each other. Each
// session's calls run on a stream of their own (StreamScope, set for the call by the service),
// so that a device runtime can give every session a queue of its own: one session's fetch then
// waits for that session's kernels only, never for another session's long batch. Work outside
// any scope (start-up, tests, the reaper) runs on stream 0, the device's default queue.
//
// A runtime learns of a stream when work is first enqueued on it, and forgets it when the
// stream ends (EndStream: its session is gone), after that work is done.
#pragma once

#include <cstdint>
#include <functional>

namespace tensord {

inline constexpr uint64_t kDefaultStream = 0;

// Sets the calling thread's stream until destroyed (then the one before is restored). A moved
// scope restores nothing; the one it moved into does.
class StreamScope {
 public:
  explicit StreamScope(uint64_t stream);
  StreamScope(StreamScope&& other) noexcept;
  StreamScope& operator=(StreamScope&&) = delete;
  StreamScope(const StreamScope&) = delete;
  ~StreamScope();

  // The calling thread's stream: kDefaultStream outside any scope.
  static uint64_t Current();

 private:
  uint64_t previous_ = kDefaultStream;
  bool active_ = true;
};

// A new stream id, never handed out before (ids start at 1).
uint64_t NewStream();

// Calls every listener with `stream`, which no work names any more: runtimes finish and free
// the queue they made for it. Listeners must not end streams themselves.
void EndStream(uint64_t stream);
// Adds a listener for the rest of the process (runtimes are made once per process).
void OnStreamEnd(std::function<void(uint64_t stream)> listener);

}  // namespace tensord
