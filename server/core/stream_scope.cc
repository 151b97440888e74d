#include "server/core/stream_scope.h"

#include <atomic>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace tensord {
namespace {

thread_local uint64_t current_stream = kDefaultStream;

struct Listeners {
  absl::Mutex mu;
  std::vector<std::function<void(uint64_t)>> all ABSL_GUARDED_BY(mu);
};

Listeners& StreamListeners() {
  static auto* listeners = new Listeners;
  return *listeners;
}

}  // namespace

StreamScope::StreamScope(uint64_t stream) : previous_(current_stream) { current_stream = stream; }

StreamScope::StreamScope(StreamScope&& other) noexcept
    : previous_(other.previous_), active_(other.active_) {
  other.active_ = false;
}

StreamScope::~StreamScope() {
  if (active_) current_stream = previous_;
}

uint64_t StreamScope::Current() { return current_stream; }

uint64_t NewStream() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void EndStream(uint64_t stream) {
  if (stream == kDefaultStream) return;
  std::vector<std::function<void(uint64_t)>> listeners;
  {
    absl::MutexLock lock(&StreamListeners().mu);
    listeners = StreamListeners().all;
  }
  for (const auto& listener : listeners) listener(stream);
}

void OnStreamEnd(std::function<void(uint64_t stream)> listener) {
  absl::MutexLock lock(&StreamListeners().mu);
  StreamListeners().all.push_back(std::move(listener));
}

}  // namespace tensord
