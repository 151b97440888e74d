// A tensord server process for the tests that signal or kill it: started on an address
// (default a free loopback port, read back from its start-up line), killed (SIGKILL) if a test
// leaves it running. The including test target defines TENSORD_PATH (tests/CMakeLists.txt);
// $TENSORD_BIN overrides it.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace tensord::testing {

inline std::string TensordPath() {
  if (const char* bin = std::getenv("TENSORD_BIN")) return bin;
  return TENSORD_PATH;
}

class TensordProcess {
 public:
  explicit TensordProcess(std::vector<std::string> flags,
                          const std::string& address = "127.0.0.1:0") {
    int err[2];
    if (pipe(err) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(err[1], STDERR_FILENO);
      close(err[0]);
      close(err[1]);
      std::vector<std::string> args = {TensordPath(), "--address=" + address};
      args.insert(args.end(), flags.begin(), flags.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(err[1]);
    err_ = fdopen(err[0], "r");
    // The start-up line names the port: "tensord listening on 127.0.0.1:PORT (...)".
    char line[1024];
    static const std::regex kListening("listening on [^ ]*:([0-9]+)");
    while (err_ != nullptr && fgets(line, sizeof(line), err_) != nullptr) {
      std::cmatch m;
      if (std::regex_search(line, m, kListening)) {
        port_ = std::stoi(m[1].str());
        break;
      }
    }
    // The server logs a line per RPC: the pipe must be drained, or a full pipe would block it.
    if (err_ != nullptr) {
      drain_ = std::thread([this] {
        char chunk[4096];
        while (fgets(chunk, sizeof(chunk), err_) != nullptr) {
          std::lock_guard<std::mutex> lock(log_mu_);
          log_ += chunk;
        }
      });
    }
  }
  ~TensordProcess() {
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (drain_.joinable()) drain_.join();  // ends at EOF: the server is gone
    if (err_ != nullptr) fclose(err_);
  }
  TensordProcess(const TensordProcess&) = delete;
  TensordProcess& operator=(const TensordProcess&) = delete;

  int port() const { return port_; }
  // What the server wrote to stderr after its start-up line, so far.
  std::string log() const {
    std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }
  void Signal(int sig) { kill(pid_, sig); }
  // The exit code, or -signal when killed; -1000 when it did not exit within `timeout`.
  int Wait(std::chrono::seconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (std::chrono::steady_clock::now() < end) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        waited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1000;
  }

 private:
  pid_t pid_ = -1;
  FILE* err_ = nullptr;
  int port_ = 0;
  bool waited_ = false;
  std::thread drain_;
  mutable std::mutex log_mu_;
  std::string log_;
};

}  // namespace tensord::testing
