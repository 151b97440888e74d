// Runs the tensordctl binary (TENSORDCTL_PATH) as a child process and collects what it wrote:
// through a pipe and a file as a script would, or with stderr on a pseudo-terminal as a person
// at a terminal would see it.
#pragma once

#include <fcntl.h>
#include <pty.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tensord::service_test {

struct CtlResult {
  int exit_code = -1;  // -1: did not exit normally (or could not be started)
  std::string out;
  std::string err;
};

// A file of this process's own directory: ctest runs each test as its own process, several
// at once.
inline std::string CtlPath(const std::string& name) {
  static const std::string* dir = [] {
    std::string pattern = ::testing::TempDir() + "/tensordctl_test.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) pattern = ::testing::TempDir();
    return new std::string(pattern);
  }();
  return *dir + "/" + name;
}

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `ENV tensordctl ARGS` (ARGS already shell-quoted where needed), stdout through a pipe
// and stderr into a file: neither is a terminal.
inline CtlResult RunCtl(const std::string& args, const std::string& env = "") {
  const std::string err_path = CtlPath("stderr.txt");
  const std::string command = absl::StrCat(env, " ", TENSORDCTL_PATH, " ", args, " 2>", err_path);
  CtlResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.out.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = ReadWholeFile(err_path);
  return r;
}

// Runs `tensordctl ARGS` with stderr on a pseudo-terminal (read back, the terminal's \r\n line
// ends included) and stdout into a file.
inline CtlResult RunCtlOnTerminal(const std::string& args) {
  CtlResult r;
  int master = -1, slave = -1;
  if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) return r;
  const std::string out_path = CtlPath("tty_stdout.txt");
  const std::string command = absl::StrCat("exec ", TENSORDCTL_PATH, " ", args);
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: the test process has threads.
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, STDOUT_FILENO);
    dup2(slave, STDERR_FILENO);
    close(out);
    close(master);
    close(slave);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(slave);
  if (pid < 0) {
    close(master);
    return r;
  }
  // Until the child's end closes the terminal (EIO on Linux).
  char buffer[4096];
  while (true) {
    const ssize_t n = read(master, buffer, sizeof(buffer));
    if (n > 0) {
      r.err.append(buffer, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(master);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadWholeFile(out_path);
  return r;
}

}  // namespace tensord::service_test
