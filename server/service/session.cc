#include "server/service/session.h"

#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/core/device_block_cache.h"
#include "server/core/host_memory.h"
#include "server/core/process_malloc.h"
#include "server/core/status.h"
#include "server/service/shared_memory.h"

namespace tensord {
namespace {

// Set when a closed or collected session freed its memory. malloc keeps freed small blocks' pages
// (glibc in its arenas, tcmalloc in its page heap), so a server's RSS would stay above its
// baseline after every session closed; the reaper hands the pages back
// (process_malloc::ReleaseFree), at most once per reap interval and off the request path. (Large
// blocks are host_memory's, which the reaper releases when idle.)
std::atomic<bool> freed_since_trim{false};
constexpr absl::Duration kHostMemoryIdle = absl::Seconds(1);

absl::Status NoSession(const std::string& id) {
  return Error(Reason::kSessionNotFound,
               absl::StrCat("session: no session '", id,
                            "' (never created, closed, or expired past its TTL)"),
               {{"session_id", id}});
}

absl::Status NoSessionToClose(const std::string& id) {
  return Error(Reason::kSessionNotFound, absl::StrCat("session: no session '", id, "' to close"),
               {{"session_id", id}});
}

}  // namespace

std::string NewSessionId() {
  // Without tokens a session id is the only thing that keeps one client out of another's
  // session, so it comes from the kernel's CSPRNG rather than a fast general-purpose
  // generator (absl::BitGen makes no cryptographic promise).
  unsigned char bytes[16];
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // getrandom only fails on kernels older than 3.17; ids must never be predictable.
      std::fprintf(stderr, "tensord: getrandom failed (errno %d); cannot make session ids\n",
                   errno);
      std::abort();
    }
    filled += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

Session::Session(std::string id, SessionConfig config)
    : id_(std::move(id)),
      config_(std::move(config)),
      account_(std::make_shared<MemoryAccount>(config_.quota_bytes)) {}

Session::~Session() {
  {
    absl::MutexLock lock(&mu_);
    Clear();
  }
  EndStream(stream_);
}

absl::Status Session::CheckLive() const {
  if (live_) return absl::OkStatus();
  return Error(Reason::kSessionNotFound,
               absl::StrCat("session: ", id_, " was closed or expired during the call"),
               {{"session_id", id_}});
}

absl::StatusOr<Tensor> Session::Get(uint64_t handle) const {
  auto it = tensors_.find(handle);
  if (it == tensors_.end()) {
    return Error(
        Reason::kTensorNotFound,
        absl::StrCat("session: no tensor with handle ", handle, " (never created, or released)"),
        {{"tensor_id", absl::StrCat(handle)}});
  }
  return it->second;
}

uint64_t Session::Store(Tensor t) {
  const uint64_t handle = next_handle_++;
  // The first handle an autodiff tensor is stored under names it; an op that returns its
  // input unchanged must not rename the original.
  if (t.autograd() && t.autograd()->tensor_id == 0) t.autograd()->tensor_id = handle;
  tensors_.emplace(handle, std::move(t));
  tensor_count_.store(static_cast<int64_t>(tensors_.size()), std::memory_order_relaxed);
  return handle;
}

absl::StatusOr<size_t> Session::Release(absl::Span<const uint64_t> handles) {
  std::set<uint64_t> unique(handles.begin(), handles.end());
  for (uint64_t h : unique) {
    if (tensors_.count(h) == 0) {
      return Error(Reason::kTensorNotFound,
                   absl::StrCat("release: no tensor with handle ", h, "; nothing was released"),
                   {{"tensor_id", absl::StrCat(h)}});
    }
  }
  for (uint64_t h : unique) {
    tensors_.erase(h);
    for (auto& [ctx, grads] : gradient_handles_) grads.erase(h);
  }
  tensor_count_.store(static_cast<int64_t>(tensors_.size()), std::memory_order_relaxed);
  return unique.size();
}

absl::StatusOr<uint64_t> Session::OpenContext(Checkpointing checkpointing) {
  if (!config_.autodiff_enabled) {
    return Error(Reason::kAutodiffContextNotEnabled,
                 absl::StrCat("autodiff: session ", id_,
                              " was created with autodiff disabled; create a session without "
                              "disable_autodiff to open contexts"),
                 {{"context_state", "disabled"}});
  }
  const uint64_t id = next_context_++;
  contexts_.emplace(id, std::make_unique<AutodiffContext>(id, checkpointing));
  open_contexts_.fetch_add(1, std::memory_order_relaxed);
  return id;
}

absl::StatusOr<AutodiffContext*> Session::FindContext(uint64_t id) {
  AutodiffContext* ctx = LookupContext(id);
  if (ctx == nullptr) {
    return Error(Reason::kContextNotFound,
                 absl::StrCat("autodiff: context ", id, " was never opened in this session"),
                 {{"context_id", absl::StrCat(id)}});
  }
  return ctx;
}

AutodiffContext* Session::LookupContext(uint64_t id) {
  auto it = contexts_.find(id);
  return it == contexts_.end() ? nullptr : it->second.get();
}

absl::Status Session::CloseContext(uint64_t id) {
  AutodiffContext* ctx;
  ASSIGN_OR_RETURN(ctx, FindContext(id));
  if (ctx->state() == ContextState::kOpen) open_contexts_.fetch_sub(1, std::memory_order_relaxed);
  ctx->Close();
  auto grads = gradient_handles_.find(id);
  if (grads != gradient_handles_.end()) {
    for (uint64_t h : grads->second) tensors_.erase(h);
    gradient_handles_.erase(grads);
  }
  tensor_count_.store(static_cast<int64_t>(tensors_.size()), std::memory_order_relaxed);
  return absl::OkStatus();
}

void Session::AddGradientHandle(uint64_t context_id, uint64_t handle) {
  gradient_handles_[context_id].insert(handle);
}

std::vector<const AutodiffContext*> Session::contexts() const {
  std::vector<const AutodiffContext*> out;
  for (const auto& [id, ctx] : contexts_) out.push_back(ctx.get());
  return out;
}

absl::StatusOr<AutodiffContext*> Session::OpenContextForLeaf(uint64_t id, const std::string& what) {
  if (!config_.autodiff_enabled) {
    return Error(Reason::kAutodiffContextNotEnabled,
                 absl::StrCat(what, ": requires_grad in session ", id_,
                              ", which was created with autodiff disabled"),
                 {{"context_id", absl::StrCat(id)}, {"context_state", "disabled"}});
  }
  if (id == 0) {
    return Error(Reason::kInvalidRequest,
                 absl::StrCat(what,
                              ": requires_grad needs a context_id; open one with "
                              "OpenAutodiffContext"),
                 {{"context_id", "0"}});
  }
  AutodiffContext* ctx;
  ASSIGN_OR_RETURN(ctx, FindContext(id));
  if (ctx->state() != ContextState::kOpen) {
    return Error(Reason::kAutodiffContextNotEnabled,
                 absl::StrCat(what, ": requires_grad names context ", id,
                              ", which is closed; open a new context"),
                 {{"context_id", absl::StrCat(id)}, {"context_state", "closed"}});
  }
  return ctx;
}

uint64_t Session::AddProgram(std::shared_ptr<Program> program) {
  const uint64_t id = next_program_++;
  programs_.emplace(id, std::move(program));
  return id;
}

absl::StatusOr<Program*> Session::FindProgram(uint64_t id) {
  auto it = programs_.find(id);
  if (it == programs_.end()) {
    return Error(
        Reason::kProgramNotFound,
        absl::StrCat("program: ", id < next_program_ ? "program " : "no program ", id,
                     id < next_program_ ? " was released" : " was compiled in this session"),
        {{"program_id", absl::StrCat(id)}});
  }
  return it->second.get();
}

absl::Status Session::ReleaseProgram(uint64_t id) {
  ASSIGN_OR_RETURN(Program * program, FindProgram(id));
  (void)program;
  programs_.erase(id);
  return absl::OkStatus();
}

absl::Status Session::AddSharedMemory(std::shared_ptr<const SharedMemoryRegion> region) {
  const std::string& name = region->spec().name;
  if (shared_memory_.count(name) > 0) {
    return Error(Reason::kInvalidRequest,
                 absl::StrCat("shared memory: a region named '", name,
                              "' is already registered in this session; unregister it first"),
                 {{"field", "region.name"}, {"region", name}});
  }
  shared_memory_.emplace(name, std::move(region));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const SharedMemoryRegion>> Session::FindSharedMemory(
    const std::string& name) const {
  auto it = shared_memory_.find(name);
  if (it == shared_memory_.end()) {
    return Error(
        Reason::kSharedMemoryNotFound,
        absl::StrCat("shared memory: no region named '", name, "' is registered in this session"),
        {{"region", name}});
  }
  return it->second;
}

absl::Status Session::RemoveSharedMemory(const std::string& name) {
  RETURN_IF_ERROR(FindSharedMemory(name).status());
  shared_memory_.erase(name);
  return absl::OkStatus();
}

std::shared_ptr<distributed::ProcessGroup> Session::group() const {
  absl::MutexLock lock(&group_mu_);
  return group_;
}

absl::Status Session::SetGroup(std::shared_ptr<distributed::ProcessGroup> group) {
  absl::MutexLock lock(&group_mu_);
  if (group_ != nullptr) {
    return Error(Reason::kGroupNotJoined,
                 absl::StrCat("JoinGroup: the session already belongs to group '", group_->name(),
                              "' (rank ", group_->rank(), "); LeaveGroup first"),
                 {{"group", group_->name()}});
  }
  group_ = std::move(group);
  return absl::OkStatus();
}

std::shared_ptr<distributed::ProcessGroup> Session::TakeGroup() {
  absl::MutexLock lock(&group_mu_);
  return std::move(group_);
}

void Session::AbortGroup() {
  std::shared_ptr<distributed::ProcessGroup> group = this->group();
  if (group != nullptr) group->Abort();
}

void Session::Clear() {
  live_ = false;
  TakeGroup();
  tensors_.clear();
  gradient_handles_.clear();
  programs_.clear();
  shared_memory_.clear();
  // Tapes keep saved activations alive; closing releases them even if a tensor outlives us.
  for (auto& [id, ctx] : contexts_) ctx->Close();
  contexts_.clear();
  tensor_count_.store(0, std::memory_order_relaxed);
  open_contexts_.store(0, std::memory_order_relaxed);
}

SessionRef::~SessionRef() {
  if (session_ != nullptr && manager_ != nullptr) manager_->Release(session_.get());
}

SessionManager::SessionManager(absl::Duration reap_interval, int64_t max_sessions_per_tenant)
    : reap_interval_(reap_interval), max_sessions_per_tenant_(max_sessions_per_tenant) {
  reaper_ = std::thread([this] { ReaperLoop(); });
}

SessionManager::~SessionManager() {
  StopReaper();
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    for (Shard& shard : shards_) {
      absl::MutexLock shard_lock(&shard.mu);
      for (auto& [id, s] : shard.sessions) sessions.push_back(std::move(s));
      shard.sessions.clear();
    }
    tenant_sessions_.clear();
  }
  for (auto& s : sessions) {
    absl::MutexLock lock(&s->mu_);
    s->Clear();
  }
}

void SessionManager::StopReaper() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (reaper_.joinable()) reaper_.join();
}

void SessionManager::ReaperLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // Wakes early on StopReaper; otherwise once per interval.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), reap_interval_);
    if (stopping_) break;
    mu_.Unlock();
    Reap(absl::Now());
    // Blocks no step reused for a second: a training loop keeps its own, a finished burst of
    // load gives its memory back.
    host_memory::ReleaseIdle(kHostMemoryIdle);
    DeviceBlockCache::ReleaseIdleEverywhere(kHostMemoryIdle);
    if (freed_since_trim.exchange(false) && !process_malloc::ReleaseFree(size() == 0)) {
      freed_since_trim.store(true);  // not given back yet: asked again next round
    }
    mu_.Lock();
  }
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Create(SessionConfig config) {
  auto session = std::make_shared<Session>(NewSessionId(), std::move(config));
  absl::MutexLock lock(&mu_);
  int64_t& held = tenant_sessions_[session->tenant()];
  if (max_sessions_per_tenant_ > 0 && held >= max_sessions_per_tenant_) {
    return Error(Reason::kLimitExceeded,
                 absl::StrCat("session: tenant '", session->tenant(), "' already holds ", held,
                              " sessions, the limit of this server (--max-sessions-per-tenant); "
                              "close a session or let one expire"),
                 {{"limit", "max_sessions_per_tenant"},
                  {"value", absl::StrCat(max_sessions_per_tenant_)},
                  {"tenant", session->tenant()}});
  }
  ++held;
  Shard& shard = ShardOf(session->id());
  absl::MutexLock shard_lock(&shard.mu);
  session->last_use_ = absl::Now();
  shard.sessions[session->id()] = session;
  return session;
}

absl::Status SessionManager::CheckTenant(const std::string& tenant, const std::string& id,
                                         bool closing) const {
  Shard& shard = ShardOf(id);
  absl::MutexLock lock(&shard.mu);
  auto it = shard.sessions.find(id);
  if (it == shard.sessions.end() || it->second->tenant() == tenant) return absl::OkStatus();
  return closing ? NoSessionToClose(id) : NoSession(id);
}

int64_t SessionManager::TenantSessions(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = tenant_sessions_.find(tenant);
  return it == tenant_sessions_.end() ? 0 : it->second;
}

SessionManager::Shard& SessionManager::ShardOf(const std::string& id) const {
  return shards_[std::hash<std::string>()(id) % kShards];
}

std::shared_ptr<Session> SessionManager::EraseLocked(
    Shard& shard, std::map<std::string, std::shared_ptr<Session>>::iterator it) {
  std::shared_ptr<Session> session = std::move(it->second);
  shard.sessions.erase(it);
  auto count = tenant_sessions_.find(session->tenant());
  if (count != tenant_sessions_.end() && --count->second <= 0) tenant_sessions_.erase(count);
  return session;
}

absl::StatusOr<SessionRef> SessionManager::Find(const std::string& id) {
  Shard& shard = ShardOf(id);
  absl::MutexLock lock(&shard.mu);
  auto it = shard.sessions.find(id);
  if (it == shard.sessions.end()) return NoSession(id);
  it->second->active_calls_++;
  return SessionRef(this, it->second);
}

void SessionManager::Release(Session* session) {
  absl::MutexLock lock(&ShardOf(session->id()).mu);
  session->active_calls_--;
  session->last_use_ = absl::Now();
}

absl::Status SessionManager::Close(const std::string& id) {
  std::shared_ptr<Session> session;
  {
    absl::MutexLock lock(&mu_);
    Shard& shard = ShardOf(id);
    absl::MutexLock shard_lock(&shard.mu);
    auto it = shard.sessions.find(id);
    if (it == shard.sessions.end()) return NoSessionToClose(id);
    session = EraseLocked(shard, it);
  }
  session->AbortGroup();
  absl::MutexLock lock(&session->mu_);
  session->Clear();
  freed_since_trim = true;
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> SessionManager::KeepAlive(const std::string& id) {
  Shard& shard = ShardOf(id);
  absl::MutexLock lock(&shard.mu);
  auto it = shard.sessions.find(id);
  if (it == shard.sessions.end()) return NoSession(id);
  it->second->last_use_ = absl::Now();
  return it->second->ttl();
}

int SessionManager::Reap(absl::Time now) {
  std::vector<std::shared_ptr<Session>> expired;
  std::function<void(const Session&)> on_expired;
  {
    absl::MutexLock lock(&mu_);
    on_expired = on_expired_;
    for (Shard& shard : shards_) {
      absl::MutexLock shard_lock(&shard.mu);
      for (auto it = shard.sessions.begin(); it != shard.sessions.end();) {
        Session& s = *it->second;
        // A session in use is never collected under a running call (a long upload, say).
        if (s.active_calls_ == 0 && now - s.last_use_ > s.ttl()) {
          auto next = std::next(it);
          expired.push_back(EraseLocked(shard, it));
          it = next;
        } else {
          ++it;
        }
      }
    }
  }
  for (auto& s : expired) {
    if (on_expired) on_expired(*s);
    absl::MutexLock lock(&s->mu_);
    s->Clear();
  }
  if (!expired.empty()) freed_since_trim = true;
  return static_cast<int>(expired.size());
}

void SessionManager::AbortGroups() {
  std::vector<std::shared_ptr<Session>> sessions;
  for (Shard& shard : shards_) {
    absl::MutexLock lock(&shard.mu);
    for (const auto& [id, session] : shard.sessions) sessions.push_back(session);
  }
  for (const auto& session : sessions) session->AbortGroup();
}

size_t SessionManager::size() const {
  size_t n = 0;
  for (const Shard& shard : shards_) {
    absl::MutexLock lock(&shard.mu);
    n += shard.sessions.size();
  }
  return n;
}

void SessionManager::set_on_expired(std::function<void(const Session&)> on_expired) {
  absl::MutexLock lock(&mu_);
  on_expired_ = std::move(on_expired);
}

std::vector<SessionUsage> SessionManager::Usage() const {
  std::vector<SessionUsage> out;
  for (const Shard& shard : shards_) {
    absl::MutexLock lock(&shard.mu);
    for (const auto& [id, s] : shard.sessions) {
      out.push_back({s->tenant(), s->device(), s->tensor_count(), s->account()->used(),
                     s->open_context_count()});
    }
  }
  return out;
}

}  // namespace tensord
