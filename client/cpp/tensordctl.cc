// tensordctl: command-line client of a tensord server. This file holds the usage text, the
// global options and the command table; the commands live in tensordctl_*.cc.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/tensordctl_commands.h"

namespace tensordctl {
namespace {

constexpr char kUsage[] =
    R"(usage: tensordctl [--address HOST:PORT] [--timeout SECONDS] [--tls-ca CA.pem]
                  [--tls-cert CERT.pem --tls-key KEY.pem] [--token TOKEN] COMMAND [ARGS]

The address defaults to $TENSORD_ADDRESS, else 127.0.0.1:50051. --tls-ca connects with TLS and
verifies the server against that CA; --tls-cert/--tls-key present a client certificate (mutual
TLS). The bearer token defaults to $TENSORD_TOKEN (prefer it: a command line is visible to
other local users).

commands:
  devices                       list the server's devices
  ops                           list ops: name, category, autodiff marking, dtypes, backends
                                (and origin, when the server has plugin ops)
  health                        print the serving status; exit 0 only when SERVING
  session create [--device D] [--ttl SECONDS] [--quota BYTES] [--no-autodiff]
                                create a session that lives until its TTL; print its id
  session info ID               show a session's tensors, memory and contexts
  session keepalive ID          reset a session's idle timer
  session close ID              free a session at once
  put [--session ID] FILE.npy   upload a tensor; prints "SESSION_ID HANDLE" (a new session
                                that lives until its TTL), or only HANDLE with --session
  get --session ID HANDLE OUT.npy
                                download a tensor to a .npy file
  roundtrip IN.npy OUT.npy      put then get within one session; exit 1 if bytes differ
                                (put, get and roundtrip show their progress when stderr is a
                                terminal and the tensor has 1 MiB or more)
  demo [--steps N] [--every N] [--lr X] [--checkpointing none|balanced] [--seed S]
                                train a 2-16-2 MLP through the server; print the loss and
                                steps/s every N steps (about 10 lines by default)
  stats [--metrics HOST:PORT] [--interval SECONDS] [--watch]
                                scrape the server's /metrics endpoint (--metrics-address of
                                tensord; default $TENSORD_METRICS_ADDRESS) twice, SECONDS apart
                                (default 1), and print sessions, memory, RPC and op rates;
                                --watch repeats until interrupted
)";

// The commands that talk gRPC to the server.
using Command = int (*)(const tc::Client& client, const Args& args);

int DevicesCommand(const tc::Client& client, const Args&) { return Devices(client); }
int OpsCommand(const tc::Client& client, const Args&) { return Ops(client); }
int HealthCommand(const tc::Client& client, const Args&) { return Health(client); }

const std::vector<std::pair<std::string, Command>>& Commands() {
  static const auto* commands = new std::vector<std::pair<std::string, Command>>{
      {"devices", DevicesCommand}, {"ops", OpsCommand}, {"health", HealthCommand},
      {"session", SessionCommand}, {"put", Put},        {"get", Get},
      {"roundtrip", Roundtrip},    {"demo", Demo}};
  return *commands;
}

}  // namespace

const std::string* Args::Flag(const std::string& name) const {
  for (const auto& [k, v] : flags) {
    if (k == name) return &v;
  }
  return nullptr;
}

Args ParseArgs(const std::vector<std::string>& argv, const std::vector<std::string>& switches) {
  Args out;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.rfind("--", 0) == 0 && a.size() > 2) {
      std::string name = a.substr(2);
      if (size_t eq = name.find('='); eq != std::string::npos) {
        out.flags.emplace_back(name.substr(0, eq), name.substr(eq + 1));
      } else if (std::find(switches.begin(), switches.end(), name) != switches.end() ||
                 i + 1 == argv.size()) {
        out.flags.emplace_back(name, "");
      } else {
        out.flags.emplace_back(name, argv[++i]);
      }
    } else {
      out.positional.push_back(a);
    }
  }
  return out;
}

int Fail(const absl::Status& status) {
  std::string line = absl::StrCat("tensordctl: ", status.message());
  if (std::string reason = tc::ReasonNameOf(status); !reason.empty()) {
    absl::StrAppend(&line, " [", absl::StatusCodeToString(status.code()), " ", reason);
    for (const auto& [key, value] : tc::MetadataOf(status)) {
      absl::StrAppend(&line, " ", key, "=", value);
    }
    absl::StrAppend(&line, "]");
  } else {
    absl::StrAppend(&line, " [", absl::StatusCodeToString(status.code()), "]");
  }
  std::cerr << line << "\n";
  return 1;
}

int Usage(const std::string& problem) {
  std::cerr << "tensordctl: " << problem << "\n" << kUsage;
  return 2;
}

}  // namespace tensordctl

int main(int argc, char** argv) {
  namespace tc = ::tensord::client;
  using tensordctl::Usage;
  std::string address = "127.0.0.1:50051";
  if (const char* env = std::getenv("TENSORD_ADDRESS"); env != nullptr && *env != '\0') {
    address = env;
  }
  double timeout_s = 0;
  std::string tls_ca, tls_cert, tls_key, token;
  if (const char* env = std::getenv("TENSORD_TOKEN"); env != nullptr) token = env;
  // The options that come before the command, as "--name value" or "--name=value".
  const std::vector<std::pair<std::string, std::string*>> global = {{"address", &address},
                                                                    {"tls-ca", &tls_ca},
                                                                    {"tls-cert", &tls_cert},
                                                                    {"tls-key", &tls_key},
                                                                    {"token", &token}};
  std::string timeout_text;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string* target = nullptr;
    std::string value;
    bool has_value = false;
    if (rest.empty() && a.rfind("--", 0) == 0) {
      const size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (name == "timeout") target = &timeout_text;
      for (const auto& [flag, dest] : global) {
        if (name == flag) target = dest;
      }
      if (target != nullptr && eq != std::string::npos) {
        value = a.substr(eq + 1);
        has_value = true;
      } else if (target != nullptr && i + 1 < argc) {
        value = argv[++i];
        has_value = true;
      }
    }
    if (target != nullptr && has_value) {
      *target = value;
      if (target == &timeout_text && !absl::SimpleAtod(value, &timeout_s)) {
        return Usage("--timeout takes seconds");
      }
    } else if (rest.empty() && (a == "-h" || a == "--help" || a == "help")) {
      std::cout << tensordctl::kUsage;
      return 0;
    } else {
      rest.push_back(a);
    }
  }
  if (rest.empty()) return Usage("no command");
  const std::string command = rest[0];
  tensordctl::Args args =
      tensordctl::ParseArgs({rest.begin() + 1, rest.end()}, {"no-autodiff", "watch"});
  // stats reads the metrics endpoint over HTTP: no gRPC connection, TLS or token.
  if (command == "stats") return tensordctl::Stats(args, timeout_s);
  const auto& commands = tensordctl::Commands();
  auto found = std::find_if(commands.begin(), commands.end(),
                            [&](const auto& entry) { return entry.first == command; });
  if (found == commands.end()) return Usage(absl::StrCat("unknown command '", command, "'"));

  tc::ClientOptions options;
  options.call_timeout_ms = static_cast<int64_t>(timeout_s * 1000);
  options.auth_token = token;
  if (tls_cert.empty() != tls_key.empty()) return Usage("--tls-cert and --tls-key go together");
  const std::vector<std::pair<const std::string*, std::string*>> pems = {
      {&tls_ca, &options.root_certificates},
      {&tls_cert, &options.client_certificate_chain},
      {&tls_key, &options.client_private_key}};
  for (const auto& [path, dest] : pems) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> pem = tc::ReadPemFile(*path);
    if (!pem.ok()) return tensordctl::Fail(pem.status());
    *dest = *std::move(pem);
  }
  if (command == "health") {
    // A container health check must answer, not hang on an unreachable server.
    if (options.call_timeout_ms == 0) options.call_timeout_ms = 5000;
  }
  absl::StatusOr<tc::Client> client = tc::Client::Connect(address, options);
  if (!client.ok()) return tensordctl::Fail(client.status());
  return found->second(*client, args);
}
