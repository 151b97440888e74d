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

#include "server/core/thread_scope.h"

namespace tensord {

inline constexpr uint64_t kDefaultStream = 0;

// Sets the calling thread's stream until destroyed (thread_scope.h); Current() is
// kDefaultStream outside any scope.
using StreamScope = ThreadScope<uint64_t, kDefaultStream>;

// A new stream id, never handed out before (ids start at 1).
uint64_t NewStream();

// Calls every listener with `stream`, which no work names any more: runtimes finish and free
// the queue they made for it. Listeners must not end streams themselves.
void EndStream(uint64_t stream);
// Adds a listener for the rest of the process (runtimes are made once per process).
void OnStreamEnd(std::function<void(uint64_t stream)> listener);

}  // namespace tensord
