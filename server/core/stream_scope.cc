#include "server/core/stream_scope.h"

#include <atomic>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace tensord {
namespace {

struct Listeners {
  absl::Mutex mu;
  std::vector<std::function<void(uint64_t)>> all ABSL_GUARDED_BY(mu);
};

Listeners& StreamListeners() {
  static auto* listeners = new Listeners;
  return *listeners;
}

}  // namespace

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
