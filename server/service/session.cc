#include "server/service/session.h"

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/core/status.h"

namespace tensord {

std::string NewSessionId() {
  // absl::BitGen is seeded from the OS entropy source: ids are unguessable, never sequential.
  thread_local absl::BitGen gen;
  uint64_t hi = absl::Uniform<uint64_t>(gen);
  uint64_t lo = absl::Uniform<uint64_t>(gen);
  return absl::StrFormat("%016x%016x", hi, lo);
}

Session::Session(std::string id, SessionConfig config)
    : id_(std::move(id)),
      config_(std::move(config)),
      account_(std::make_shared<MemoryAccount>(config_.quota_bytes)) {}

Session::~Session() {
  absl::MutexLock lock(&mu_);
  Clear();
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
  ctx->Close();
  auto grads = gradient_handles_.find(id);
  if (grads != gradient_handles_.end()) {
    for (uint64_t h : grads->second) tensors_.erase(h);
    gradient_handles_.erase(grads);
  }
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

void Session::Clear() {
  live_ = false;
  tensors_.clear();
  gradient_handles_.clear();
  // Tapes keep saved activations alive; closing releases them even if a tensor outlives us.
  for (auto& [id, ctx] : contexts_) ctx->Close();
  contexts_.clear();
}

SessionRef::~SessionRef() {
  if (session_ != nullptr && manager_ != nullptr) manager_->Release(session_.get());
}

SessionManager::SessionManager(absl::Duration reap_interval) : reap_interval_(reap_interval) {
  reaper_ = std::thread([this] { ReaperLoop(); });
}

SessionManager::~SessionManager() {
  StopReaper();
  std::map<std::string, std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    sessions.swap(sessions_);
  }
  for (auto& [id, s] : sessions) {
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
    mu_.Lock();
  }
}

std::shared_ptr<Session> SessionManager::Create(SessionConfig config) {
  auto session = std::make_shared<Session>(NewSessionId(), std::move(config));
  absl::MutexLock lock(&mu_);
  session->last_use_ = absl::Now();
  sessions_[session->id()] = session;
  return session;
}

absl::StatusOr<SessionRef> SessionManager::Find(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    return Error(Reason::kSessionNotFound,
                 absl::StrCat("session: no session '", id,
                              "' (never created, closed, or expired past its TTL)"),
                 {{"session_id", id}});
  }
  it->second->active_calls_++;
  return SessionRef(this, it->second);
}

void SessionManager::Release(Session* session) {
  absl::MutexLock lock(&mu_);
  session->active_calls_--;
  session->last_use_ = absl::Now();
}

absl::Status SessionManager::Close(const std::string& id) {
  std::shared_ptr<Session> session;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return Error(Reason::kSessionNotFound,
                   absl::StrCat("session: no session '", id, "' to close"), {{"session_id", id}});
    }
    session = std::move(it->second);
    sessions_.erase(it);
  }
  absl::MutexLock lock(&session->mu_);
  session->Clear();
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> SessionManager::KeepAlive(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    return Error(Reason::kSessionNotFound,
                 absl::StrCat("session: no session '", id,
                              "' (never created, closed, or expired past its TTL)"),
                 {{"session_id", id}});
  }
  it->second->last_use_ = absl::Now();
  return it->second->ttl();
}

int SessionManager::Reap(absl::Time now) {
  std::vector<std::shared_ptr<Session>> expired;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      Session& s = *it->second;
      // A session in use is never collected under a running call (a long upload, say).
      if (s.active_calls_ == 0 && now - s.last_use_ > s.ttl()) {
        expired.push_back(std::move(it->second));
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& s : expired) {
    absl::MutexLock lock(&s->mu_);
    s->Clear();
  }
  return static_cast<int>(expired.size());
}

size_t SessionManager::size() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

}  // namespace tensord
