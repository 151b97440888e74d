#include "server/backends/cpu/onednn_workspace_cache.h"

#include <list>

#include "absl/synchronization/mutex.h"

namespace tensord::cpu::onednn {
namespace {

struct Entry {
  std::string key;
  std::weak_ptr<Storage> storage;  // identity: a dead storage's address may be reused
  const void* data;
  uint64_t version;
  std::shared_ptr<const PooledMemory> workspace;
};

struct Cache {
  absl::Mutex mu;
  std::list<Entry> entries ABSL_GUARDED_BY(mu);  // most recently used first
  size_t bytes ABSL_GUARDED_BY(mu) = 0;
};

Cache& Get() {
  static Cache* cache = new Cache();
  return *cache;
}

bool SameInput(const Entry& e, const Tensor& input) {
  if (e.data != input.raw() || e.version != input.storage()->version()) return false;
  return e.storage.lock() == input.storage();
}

}  // namespace

void KeepWorkspace(const std::string& key, const Tensor& input,
                   std::shared_ptr<const PooledMemory> workspace) {
  const size_t size = workspace->bytes();
  if (size > kMaxWorkspaceBytes) return;
  Cache& c = Get();
  std::list<Entry> dropped;  // freed outside the lock
  absl::MutexLock lock(&c.mu);
  for (auto it = c.entries.begin(); it != c.entries.end();) {
    auto next = std::next(it);
    // Entries of dead inputs, and the one this replaces, go now.
    if (it->storage.expired() || (it->key == key && it->data == input.raw())) {
      c.bytes -= it->workspace->bytes();
      dropped.splice(dropped.end(), c.entries, it);
    }
    it = next;
  }
  c.entries.push_front(
      Entry{key, input.storage(), input.raw(), input.storage()->version(), std::move(workspace)});
  c.bytes += size;
  while (c.entries.size() > kMaxWorkspaces || c.bytes > kMaxWorkspaceBytes) {
    c.bytes -= c.entries.back().workspace->bytes();
    dropped.splice(dropped.end(), c.entries, std::prev(c.entries.end()));
  }
}

std::shared_ptr<const PooledMemory> FindWorkspace(const std::string& key, const Tensor& input) {
  Cache& c = Get();
  absl::MutexLock lock(&c.mu);
  for (auto it = c.entries.begin(); it != c.entries.end(); ++it) {
    if (it->key != key || !SameInput(*it, input)) continue;
    c.entries.splice(c.entries.begin(), c.entries, it);
    return c.entries.front().workspace;
  }
  return nullptr;
}

}  // namespace tensord::cpu::onednn
