#include "server/service/token_store.h"

#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/service/server_log.h"

namespace tensord {
namespace {

// `error` comes from TokenTable::Load, which names lines, never tokens.
void LogReloaded(const std::string& path, size_t tokens) {
  DefaultLog().Write(LogLevel::kInfo, "tokens_reloaded",
                     {{"path", path}, {"tokens", static_cast<int64_t>(tokens)}});
}

void LogReloadFailed(const std::string& path, const absl::Status& error) {
  DefaultLog().Write(LogLevel::kWarning, "tokens_reload_failed",
                     {{"path", path}, {"error", error.message()}});
}

// Starts at 1: a thread's copy of no store has 0.
uint64_t NextSerial() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

int64_t Nanoseconds(const struct timespec& t) { return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec; }

}  // namespace

bool TokenStore::FileStamp::operator==(const FileStamp& other) const {
  return exists == other.exists && device == other.device && inode == other.inode &&
         size == other.size && mtime_ns == other.mtime_ns && ctime_ns == other.ctime_ns;
}

absl::StatusOr<std::unique_ptr<TokenStore>> TokenStore::Open(const std::string& path,
                                                             absl::Duration poll_interval) {
  if (poll_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("server: the token file poll interval must be >= 0 (0 = no watching), got ",
                     absl::FormatDuration(poll_interval)));
  }
  const FileStamp stamp = Stat(path);
  TokenTable table;
  ASSIGN_OR_RETURN(table, TokenTable::Load(path));
  std::unique_ptr<TokenStore> store(
      new TokenStore(path, std::make_shared<const TokenTable>(std::move(table)), stamp));
  if (poll_interval > absl::ZeroDuration()) {
    store->watcher_ = std::thread([s = store.get(), poll_interval] { s->Watch(poll_interval); });
  }
  return store;
}

TokenStore::TokenStore(std::string path, std::shared_ptr<const TokenTable> table, FileStamp stamp)
    : path_(std::move(path)), serial_(NextSerial()), table_(std::move(table)), last_read_(stamp) {}

TokenStore::~TokenStore() {
  {
    absl::MutexLock lock(&watch_mu_);
    stop_watching_ = true;
  }
  if (watcher_.joinable()) watcher_.join();
}

const std::shared_ptr<const TokenTable>& TokenStore::Current() const {
  // The calling thread's copy: of one store at a time (a server's threads serve one store).
  thread_local struct {
    uint64_t store = 0;
    uint64_t reloads = 0;
    std::shared_ptr<const TokenTable> table;
  } copy;
  const uint64_t reloads = reloads_.load(std::memory_order_acquire);
  if (copy.store != serial_ || copy.reloads != reloads || copy.table == nullptr) {
    absl::MutexLock lock(&table_mu_);
    copy.store = serial_;
    copy.reloads = reloads_.load(std::memory_order_relaxed);
    copy.table = table_;
  }
  return copy.table;
}

absl::Status TokenStore::Reload() { return ReloadIf(/*only_if_changed=*/false); }

TokenStore::FileStamp TokenStore::Stat(const std::string& path) {
  struct stat st;
  FileStamp stamp;
  // stat, not lstat: a symlink swapped to a new target (Kubernetes secrets) is a new file.
  if (stat(path.c_str(), &st) != 0) return stamp;
  stamp.exists = true;
  stamp.device = st.st_dev;
  stamp.inode = st.st_ino;
  stamp.size = st.st_size;
  stamp.mtime_ns = Nanoseconds(st.st_mtim);
  stamp.ctime_ns = Nanoseconds(st.st_ctim);
  return stamp;
}

absl::Status TokenStore::ReloadIf(bool only_if_changed) {
  absl::MutexLock reload_lock(&reload_mu_);
  // Stamped before reading: a write that lands during the read moves the stamp again, and the
  // next check reads the file once more.
  const FileStamp stamp = Stat(path_);
  if (only_if_changed && stamp == last_read_) return absl::OkStatus();
  // Remembered whatever the outcome, so a bad file is reported once, not at every check.
  last_read_ = stamp;
  absl::StatusOr<TokenTable> table = TokenTable::Load(path_);
  if (!table.ok()) {
    LogReloadFailed(path_, table.status());
    return table.status();
  }
  const size_t tokens = table->size();
  auto fresh = std::make_shared<const TokenTable>(*std::move(table));
  {
    absl::MutexLock lock(&table_mu_);
    table_.swap(fresh);
    reloads_.fetch_add(1, std::memory_order_release);
  }
  // The old table is freed once no call holds it and every thread that read it has read the
  // new one (or ended); here, outside the lock, when none did.
  fresh.reset();
  LogReloaded(path_, tokens);
  return absl::OkStatus();
}

void TokenStore::Watch(absl::Duration poll_interval) {
  absl::MutexLock lock(&watch_mu_);
  while (!watch_mu_.AwaitWithTimeout(absl::Condition(&stop_watching_), poll_interval)) {
    watch_mu_.Unlock();
    // Failures are logged by the reload; the table in use stays as it was.
    ReloadIf(/*only_if_changed=*/true).IgnoreError();
    watch_mu_.Lock();
  }
}

}  // namespace tensord
