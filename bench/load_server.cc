#include "bench/load_server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tensord::bench {
namespace {

// One line from `fd` (without the newline); false at end of file.
bool ReadLine(int fd, std::string* line) {
  line->clear();
  char c;
  while (true) {
    const ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return !line->empty();
    if (c == '\n') return true;
    line->push_back(c);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<SpawnedServer>> SpawnedServer::Start(const std::string& binary) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError(absl::StrCat("load: pipe: ", strerror(errno)));
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("load: fork: ", strerror(errno)));
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    // Failed calls only: a line per RPC of the load would flood the bench's output.
    execl(binary.c_str(), binary.c_str(), "--address=127.0.0.1:0", "--log-level=warning",
          static_cast<char*>(nullptr));
    std::fprintf(stderr, "load: cannot run %s: %s\n", binary.c_str(), strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  std::string line;
  constexpr char kListening[] = "listening on ";
  while (ReadLine(fds[0], &line)) {
    const size_t at = line.find(kListening);
    if (at == std::string::npos) {
      std::fprintf(stderr, "%s\n", line.c_str());
      continue;
    }
    std::string target = line.substr(at + sizeof(kListening) - 1);
    target = target.substr(0, target.find(' '));
    return std::unique_ptr<SpawnedServer>(new SpawnedServer(pid, fds[0], target));
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return absl::UnavailableError(
      absl::StrCat("load: ", binary, " exited before listening (status ", status, ")"));
}

SpawnedServer::SpawnedServer(pid_t pid, int stderr_fd, std::string target)
    : pid_(pid), stderr_fd_(stderr_fd), target_(std::move(target)) {
  forward_ = std::thread([fd = stderr_fd_] {
    std::string line;
    while (ReadLine(fd, &line)) std::fprintf(stderr, "  [tensord] %s\n", line.c_str());
  });
}

SpawnedServer::~SpawnedServer() {
  if (!stopped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (forward_.joinable()) forward_.join();
  close(stderr_fd_);
}

absl::Status SpawnedServer::Stop() {
  stopped_ = true;
  kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 300; ++i) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
      return absl::InternalError(absl::StrCat("load: tensord exited with status ", status,
                                              " on SIGTERM (expected exit 0)"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  return absl::DeadlineExceededError("load: tensord did not exit within 30 s of SIGTERM");
}

RssSampler::~RssSampler() {
  if (sampler_.joinable()) StopPeakTracking();
}

int64_t RssSampler::Now() const {
  if (pid_ == 0) return 0;
  std::ifstream in(absl::StrCat("/proc/", pid_, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    int64_t kib = 0;
    std::string digits;
    for (char c : line) {
      if (c >= '0' && c <= '9') digits.push_back(c);
    }
    if (absl::SimpleAtoi(digits, &kib)) return kib;
  }
  return 0;
}

void RssSampler::StartPeakTracking() {
  peak_ = Now();
  tracking_ = true;
  sampler_ = std::thread([this] {
    while (tracking_) {
      const int64_t now = Now();
      int64_t peak = peak_.load();
      while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
}

int64_t RssSampler::StopPeakTracking() {
  tracking_ = false;
  if (sampler_.joinable()) sampler_.join();
  return std::max(peak_.load(), Now());
}

}  // namespace tensord::bench
