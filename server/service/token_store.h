// The --auth-tokens table a server uses, replaceable while it serves: re-read on request
// (SIGHUP, TensordServer::ReloadCredentials) and, when watching, whenever the file changes. A
// file that cannot be read or parsed leaves the table in use as it was.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/service/auth.h"

namespace tensord {

class TokenStore {
 public:
  // Reads `path`; an error here fails the server's start. With a positive `poll_interval` a
  // thread checks the file that often and reloads it when its identity (device, inode, size,
  // modification or change time) differs from the last read: an in-place edit, a new file
  // renamed over it, a Kubernetes secret's symlink swap. Zero: reloads only on request.
  static absl::StatusOr<std::unique_ptr<TokenStore>> Open(const std::string& path,
                                                          absl::Duration poll_interval);
  ~TokenStore();  // stops the watch thread
  TokenStore(const TokenStore&) = delete;
  TokenStore& operator=(const TokenStore&) = delete;

  // The table in use, never null, read without a lock or a shared count: each thread keeps
  // the table it last read beside the store's reload count then, and reads the table again
  // only when that count has moved. The reference is that thread's copy, replaced at its next
  // Current() after a reload or of another store: a call reads it once for its whole
  // admission, so a reload in between cannot mix two tables in one decision; copy it to keep
  // the table longer.
  const std::shared_ptr<const TokenTable>& Current() const;

  // Re-reads the file now and swaps the table in; an error (the reason, never a token) keeps
  // the table in use. Both outcomes are logged. Safe from any thread; reloads run one at a time.
  absl::Status Reload();

  const std::string& path() const { return path_; }

 private:
  // What tells one version of the file from another without reading it.
  struct FileStamp {
    bool exists = false;
    dev_t device = 0;
    ino_t inode = 0;
    int64_t size = 0;
    int64_t mtime_ns = 0;
    int64_t ctime_ns = 0;
    bool operator==(const FileStamp& other) const;
  };

  TokenStore(std::string path, std::shared_ptr<const TokenTable> table, FileStamp stamp);
  static FileStamp Stat(const std::string& path);
  // Reload when `only_if_changed` is false or the file's stamp moved since the last read.
  absl::Status ReloadIf(bool only_if_changed);
  void Watch(absl::Duration poll_interval);

  const std::string path_;
  // Tells this store's tables from another's in a thread's copy; never reused in a process.
  const uint64_t serial_;

  mutable absl::Mutex table_mu_;
  std::shared_ptr<const TokenTable> table_ ABSL_GUARDED_BY(table_mu_);
  // Reloads so far; moved under table_mu_ with each swap of table_.
  std::atomic<uint64_t> reloads_{0};

  // Held for a whole reload, so a SIGHUP and the watch thread never interleave their reads.
  absl::Mutex reload_mu_ ABSL_ACQUIRED_BEFORE(table_mu_);
  FileStamp last_read_ ABSL_GUARDED_BY(reload_mu_);

  absl::Mutex watch_mu_;
  bool stop_watching_ ABSL_GUARDED_BY(watch_mu_) = false;
  std::thread watcher_;
};

}  // namespace tensord
