// tensordctl's commands, one function each, and what they share: the arguments of a command
// and the way a failure is reported. main() (tensordctl.cc) picks the command.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/cpp/tensord.h"

namespace tensordctl {

namespace tc = ::tensord::client;

// Flags of one command: "--name value" pairs and bare "--switch"es; the rest are positional.
struct Args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> flags;

  const std::string* Flag(const std::string& name) const;
};

// `switches` are the flags that take no value.
Args ParseArgs(const std::vector<std::string>& argv, const std::vector<std::string>& switches);

// Prints the failure (message, gRPC code, error reason and metadata) on stderr; returns 1.
int Fail(const absl::Status& status);
// Prints the problem and the usage text on stderr; returns 2.
int Usage(const std::string& problem);

// tensordctl_info.cc
int Devices(const tc::Client& client);
int Ops(const tc::Client& client);
int Health(const tc::Client& client);
int SessionCommand(const tc::Client& client, const Args& args);

// tensordctl_transfer.cc
int Put(const tc::Client& client, const Args& args);
int Get(const tc::Client& client, const Args& args);
int Roundtrip(const tc::Client& client, const Args& args);

// tensordctl_demo.cc
int Demo(const tc::Client& client, const Args& args);

// tensordctl_stats.cc: scrapes the server's /metrics (plain HTTP), not its gRPC port.
// `timeout_s` (0 = a default) bounds each HTTP request.
int Stats(const Args& args, double timeout_s);

}  // namespace tensordctl
