// Helpers of bench/load: a tensord process started for the run, and its resident memory.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tensord::bench {

// `tensord --address=127.0.0.1:0`, its port read from the "listening on" line; the rest of
// its stderr is passed through, so a server-side error shows next to the load's report.
class SpawnedServer {
 public:
  static absl::StatusOr<std::unique_ptr<SpawnedServer>> Start(const std::string& binary);
  ~SpawnedServer();  // kills the server if Stop() was not called

  const std::string& target() const { return target_; }
  pid_t pid() const { return pid_; }
  // SIGTERM, then waits up to 30 s: an error unless the server exits 0 in time.
  absl::Status Stop();

 private:
  SpawnedServer(pid_t pid, int stderr_fd, std::string target);
  pid_t pid_;
  int stderr_fd_;
  std::string target_;
  std::thread forward_;
  bool stopped_ = false;
};

// VmRSS of a process from /proc/<pid>/status, in KiB (0 when pid is 0 or unreadable).
class RssSampler {
 public:
  explicit RssSampler(pid_t pid) : pid_(pid) {}
  ~RssSampler();
  int64_t Now() const;
  // Samples every 50 ms on a thread until StopPeakTracking, which returns the highest value.
  void StartPeakTracking();
  int64_t StopPeakTracking();

 private:
  const pid_t pid_;
  std::atomic<bool> tracking_{false};
  std::atomic<int64_t> peak_{0};
  std::thread sampler_;
};

}  // namespace tensord::bench
