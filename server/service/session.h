// Sessions: a client's namespace of tensor handles and autodiff contexts, with a memory quota
// and an idle TTL. No gRPC here; the RPC layer looks sessions up by id and locks them.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/autodiff/tape.h"
#include "server/core/matmul_precision.h"
#include "server/core/stream_scope.h"
#include "server/core/tensor.h"
#include "server/distributed/process_group.h"

namespace tensord {

struct Program;            // server/service/program.h
class SharedMemoryRegion;  // server/service/shared_memory.h

struct SessionConfig {
  std::string device = kHostDevice;
  absl::Duration ttl = absl::Minutes(10);
  int64_t quota_bytes = int64_t{4} << 30;
  bool autodiff_enabled = true;
  MatmulPrecision matmul_precision = MatmulPrecision::kHighest;
  // Who owns the session: only calls of this tenant can name it (see SessionManager).
  std::string tenant;
};

// Every method but the accessors of immutable fields requires mu() to be held: the calls of
// one session are serialized (an Execute batch sees a consistent session and rolls back as
// a unit), while different sessions run in parallel.
class Session {
 public:
  Session(std::string id, SessionConfig config);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::string& id() const { return id_; }
  // The stream its calls' device work runs on (stream_scope.h): a queue of its own on a GPU.
  uint64_t stream() const { return stream_; }
  const std::string& tenant() const { return config_.tenant; }
  const std::string& device() const { return config_.device; }
  absl::Duration ttl() const { return config_.ttl; }
  bool autodiff_enabled() const { return config_.autodiff_enabled; }
  MatmulPrecision matmul_precision() const { return config_.matmul_precision; }
  const std::shared_ptr<MemoryAccount>& account() const { return account_; }
  absl::Mutex& mu() const ABSL_LOCK_RETURNED(mu_) { return mu_; }
  // Tensor handles held and autodiff contexts open; kept beside the maps they count so the
  // metrics scrape reads them without the session's lock (a long batch may hold it).
  int64_t tensor_count() const { return tensor_count_.load(std::memory_order_relaxed); }
  int64_t open_context_count() const { return open_contexts_.load(std::memory_order_relaxed); }

  // False once closed or collected: a call that found the session before that must not store.
  bool live() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return live_; }
  // SESSION_NOT_FOUND when the session was closed while the caller waited for its lock.
  absl::Status CheckLive() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // TENSOR_NOT_FOUND (metadata tensor_id) for an unknown or released handle.
  absl::StatusOr<Tensor> Get(uint64_t handle) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores `t` under a new handle (never reused). An autodiff tensor learns its handle, so
  // errors and gradients can name it.
  uint64_t Store(Tensor t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Atomic: an unknown handle fails the call and frees nothing. Repeated handles count once.
  absl::StatusOr<size_t> Release(absl::Span<const uint64_t> handles)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const std::map<uint64_t, Tensor>& tensors() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return tensors_;
  }

  // Autodiff contexts. Ids start at 1; closed contexts stay listed so errors can say "closed".
  absl::StatusOr<uint64_t> OpenContext(Checkpointing checkpointing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // CONTEXT_NOT_FOUND for an id never opened in this session.
  absl::StatusOr<AutodiffContext*> FindContext(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Null for an id never opened (the dispatcher's CallEnv::contexts).
  AutodiffContext* LookupContext(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees the tape and the gradient handles Backward produced for the context. Idempotent.
  absl::Status CloseContext(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Remembers a gradient handle, so closing the context frees it.
  void AddGradientHandle(uint64_t context_id, uint64_t handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<const AutodiffContext*> contexts() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // AUTODIFF_CONTEXT_NOT_ENABLED (disabled) / CONTEXT_NOT_FOUND / AUTODIFF_CONTEXT_NOT_ENABLED
  // (closed): the context a new requires-grad leaf may join. `what` names the caller.
  absl::StatusOr<AutodiffContext*> OpenContextForLeaf(uint64_t id, const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Programs (CompileProgram): stored under ids starting at 1, never reused.
  uint64_t AddProgram(std::shared_ptr<Program> program) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // PROGRAM_NOT_FOUND (metadata program_id) for an id never compiled here or released.
  absl::StatusOr<Program*> FindProgram(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReleaseProgram(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const std::map<uint64_t, std::shared_ptr<Program>>& programs() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return programs_;
  }

  // Shared memory regions (RegisterSharedMemory), by name. INVALID_REQUEST (field
  // region.name) for a name already registered.
  absl::Status AddSharedMemory(std::shared_ptr<const SharedMemoryRegion> region)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SHARED_MEMORY_NOT_FOUND (metadata region) for a name not registered here. The region stays
  // open for the caller while it copies, even if it is unregistered meanwhile.
  absl::StatusOr<std::shared_ptr<const SharedMemoryRegion>> FindSharedMemory(
      const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RemoveSharedMemory(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const std::map<std::string, std::shared_ptr<const SharedMemoryRegion>>& shared_memory() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shared_memory_;
  }

  // The process group the session joined (JoinGroup); null when none. Under a lock of its own,
  // so that closing the session can abort a collective that waits for its peers while the
  // call holds mu().
  std::shared_ptr<distributed::ProcessGroup> group() const ABSL_LOCKS_EXCLUDED(group_mu_);
  // GROUP_NOT_JOINED (metadata group) when the session already belongs to a group.
  absl::Status SetGroup(std::shared_ptr<distributed::ProcessGroup> group)
      ABSL_LOCKS_EXCLUDED(group_mu_);
  // Leaves the group; null when the session belongs to none.
  std::shared_ptr<distributed::ProcessGroup> TakeGroup() ABSL_LOCKS_EXCLUDED(group_mu_);
  // Makes a collective waiting for peers fail now (close and expiry; needs no mu()).
  void AbortGroup() ABSL_LOCKS_EXCLUDED(group_mu_);

  // Drops every tensor, context, program and shared memory region (close and expiry). The memory
  // returns to the account once no in-flight transfer holds a tensor.
  void Clear() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  friend class SessionManager;

  const std::string id_;
  const uint64_t stream_ = NewStream();
  const SessionConfig config_;
  const std::shared_ptr<MemoryAccount> account_;
  mutable absl::Mutex mu_;
  bool live_ ABSL_GUARDED_BY(mu_) = true;
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Tensor> tensors_ ABSL_GUARDED_BY(mu_);
  uint64_t next_context_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::unique_ptr<AutodiffContext>> contexts_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::set<uint64_t>> gradient_handles_ ABSL_GUARDED_BY(mu_);
  uint64_t next_program_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::shared_ptr<Program>> programs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<const SharedMemoryRegion>> shared_memory_
      ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> tensor_count_{0};
  std::atomic<int64_t> open_contexts_{0};
  mutable absl::Mutex group_mu_;
  std::shared_ptr<distributed::ProcessGroup> group_ ABSL_GUARDED_BY(group_mu_);

  // Owned by the mutex of the SessionManager shard that holds the session: calls in flight and
  // the end of the last one.
  int active_calls_ = 0;
  absl::Time last_use_;
};

class SessionManager;

// What one session holds, for the metrics (read without the session's lock).
struct SessionUsage {
  std::string tenant;
  std::string device;
  int64_t tensors = 0;
  int64_t bytes = 0;  // charged to its quota
  int64_t open_contexts = 0;
};

// Keeps a session from being collected while a call uses it, and marks it used when done. The
// calling thread's device work runs on the session's stream, and its matrix products at the
// session's precision, while the reference lives.
class SessionRef {
 public:
  SessionRef(SessionManager* manager, std::shared_ptr<Session> session)
      : manager_(manager),
        session_(std::move(session)),
        stream_(session_->stream()),
        precision_(session_->matmul_precision()) {}
  SessionRef(SessionRef&& other) noexcept = default;
  SessionRef& operator=(SessionRef&&) = delete;
  SessionRef(const SessionRef&) = delete;
  ~SessionRef();

  Session* operator->() const { return session_.get(); }
  Session& operator*() const { return *session_; }

 private:
  SessionManager* manager_;
  std::shared_ptr<Session> session_;
  StreamScope stream_;
  MatmulPrecisionScope precision_;
};

class SessionManager {
 public:
  // Starts the reaper, which collects sessions idle past their TTL every `reap_interval`.
  // A tenant may hold at most `max_sessions_per_tenant` sessions at once (0 = no limit).
  explicit SessionManager(absl::Duration reap_interval, int64_t max_sessions_per_tenant = 0);
  ~SessionManager();  // stops the reaper
  SessionManager(const SessionManager&) = delete;
  SessionManager& operator=(const SessionManager&) = delete;

  // LIMIT_EXCEEDED when config.tenant already holds max_sessions_per_tenant sessions.
  absl::StatusOr<std::shared_ptr<Session>> Create(SessionConfig config);
  // SESSION_NOT_FOUND (NOT_FOUND) for an id that does not exist, was closed or expired.
  absl::StatusOr<SessionRef> Find(const std::string& id);
  // OK when `id` names a live session of `tenant`, or no session at all (the call itself then
  // fails as for any unknown id). A session of another tenant gets the very error an unknown
  // id gets from Find (or from Close, with `closing`), so a tenant cannot learn that another
  // tenant's id exists. A session never changes tenant and ids are never reused, so a check
  // before the call stays true for the whole call.
  absl::Status CheckTenant(const std::string& tenant, const std::string& id,
                           bool closing = false) const;
  // Sessions `tenant` holds now.
  int64_t TenantSessions(const std::string& tenant) const;
  // Frees the session at once (waits for a call holding its lock to finish).
  absl::Status Close(const std::string& id);
  // Resets the idle timer; returns the session's TTL.
  absl::StatusOr<absl::Duration> KeepAlive(const std::string& id);
  // Collects sessions idle past their TTL at `now`; returns how many. The reaper calls it.
  int Reap(absl::Time now);
  size_t size() const;
  // Makes every collective that waits for its peers fail now (the server is stopping): such a
  // wait would otherwise hold its call, and the shutdown, up to the collective timeout.
  void AbortGroups();
  // Every session's holdings now.
  std::vector<SessionUsage> Usage() const;
  // Called by the reaper, outside any lock, with each session it collected (before its
  // tensors are freed).
  void set_on_expired(std::function<void(const Session&)> on_expired);
  void StopReaper();

 private:
  friend class SessionRef;
  void Release(Session* session);
  void ReaperLoop();
  // The sessions, in shards by id: a call finds its session (and ends) under its shard's lock
  // only, so calls of different sessions do not wait for one process-wide lock. mu_ (the
  // tenants' counts, the reaper) is taken before a shard's lock, never after.
  struct Shard {
    mutable absl::Mutex mu;
    std::map<std::string, std::shared_ptr<Session>> sessions ABSL_GUARDED_BY(mu);
  };
  static constexpr size_t kShards = 16;
  Shard& ShardOf(const std::string& id) const;
  // Removes a session from its shard and its tenant's count; returns it.
  std::shared_ptr<Session> EraseLocked(Shard& shard,
                                       std::map<std::string, std::shared_ptr<Session>>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_, shard.mu);

  const absl::Duration reap_interval_;
  const int64_t max_sessions_per_tenant_;
  mutable absl::Mutex mu_;
  mutable std::array<Shard, kShards> shards_;
  std::map<std::string, int64_t> tenant_sessions_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void(const Session&)> on_expired_ ABSL_GUARDED_BY(mu_);
  std::thread reaper_;
};

// 128 bits from the operating system's CSPRNG (getrandom) as 32 lowercase hex digits.
std::string NewSessionId();

}  // namespace tensord
