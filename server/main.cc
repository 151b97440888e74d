// tensord: the tensor-compute server. Flags may also come from TENSORD_* environment variables
// (handy in containers); a flag on the command line wins over its variable.
#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/service/server.h"
#include "server/service/server_log.h"

ABSL_FLAG(std::string, address, "0.0.0.0:50051",
          "host:port to listen on; port 0 picks a free port (env TENSORD_ADDRESS)");
ABSL_FLAG(int64_t, ttl_seconds, 600,
          "default idle time before a session is collected (env TENSORD_TTL_SECONDS)");
ABSL_FLAG(int64_t, quota_bytes, int64_t{4} << 30,
          "default memory quota of a session (env TENSORD_QUOTA_BYTES)");
ABSL_FLAG(int64_t, max_quota_bytes, int64_t{64} << 30,
          "largest quota a session may ask for (env TENSORD_MAX_QUOTA_BYTES)");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20,
          "gRPC message size limit; larger tensors stream in chunks "
          "(env TENSORD_MAX_MESSAGE_BYTES)");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "on SIGTERM/SIGINT, how long in-flight calls may finish before they are cancelled, "
          "e.g. 5s or 500ms (env TENSORD_SHUTDOWN_GRACE)");
ABSL_FLAG(int64_t, shutdown_grace_ms, -1,
          "the same in milliseconds (older spelling; wins over --shutdown_grace when set) "
          "(env TENSORD_SHUTDOWN_GRACE_MS)");
ABSL_FLAG(int64_t, max_tensor_bytes, int64_t{16} << 30,
          "largest tensor (bytes) a put, literal, op output or gradient may have "
          "(env TENSORD_MAX_TENSOR_BYTES)");
ABSL_FLAG(int64_t, max_rank, 32, "most dimensions a tensor may have (env TENSORD_MAX_RANK)");
ABSL_FLAG(int64_t, max_dim, int64_t{1} << 34,
          "largest size of any one dimension (env TENSORD_MAX_DIM)");
ABSL_FLAG(int64_t, max_calls_per_batch, 10000,
          "most op calls in one Execute batch (env TENSORD_MAX_CALLS_PER_BATCH)");
ABSL_FLAG(int64_t, max_contexts_per_session, 256,
          "most autodiff contexts open at once in one session "
          "(env TENSORD_MAX_CONTEXTS_PER_SESSION)");
ABSL_FLAG(int64_t, max_calls_per_program, 10000,
          "most op calls (forward and updates) in one program (env TENSORD_MAX_CALLS_PER_PROGRAM)");
ABSL_FLAG(int64_t, max_programs_per_session, 256,
          "most programs one session holds at once (env TENSORD_MAX_PROGRAMS_PER_SESSION)");
ABSL_FLAG(bool, shared_memory, false,
          "serve same-host shared memory regions (docs/shared-memory.md): a client that may "
          "register one may read and write any POSIX shared memory object this server's user "
          "can open (env TENSORD_SHARED_MEMORY)");
ABSL_FLAG(std::string, shared_memory_key_prefix, "",
          "when set, only shared memory objects whose key starts with it may be registered "
          "(env TENSORD_SHARED_MEMORY_KEY_PREFIX)");
ABSL_FLAG(int64_t, max_shared_memory_regions_per_session, 64,
          "most shared memory regions one session holds registered at once "
          "(env TENSORD_MAX_SHARED_MEMORY_REGIONS_PER_SESSION)");
ABSL_FLAG(absl::Duration, collective_timeout, absl::Seconds(60),
          "how long a rank of a process group waits for its peers, at JoinGroup and in each "
          "collective, before the call fails with PEER_UNAVAILABLE (env "
          "TENSORD_COLLECTIVE_TIMEOUT)");
ABSL_FLAG(std::string, collective_address, "",
          "the address (host name or IP of this machine) the peers of a process group reach "
          "this server's collectives at; empty: the host name, or the loopback address where "
          "the host name does not resolve (env TENSORD_COLLECTIVE_ADDRESS)");
ABSL_FLAG(std::vector<std::string>, collective_rendezvous_prefix, {},
          "when set, a process group's rendezvous URI must start with one of these "
          "(comma-separated, e.g. file:///shared/rendezvous/,redis://redis:6379); default any "
          "(env TENSORD_COLLECTIVE_RENDEZVOUS_PREFIX)");
ABSL_FLAG(std::vector<std::string>, plugin, {},
          "custom-op plugin (shared library) to load; comma-separated and repeatable, see "
          "docs/plugins.md (env TENSORD_PLUGINS, comma-separated)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of the server; with --tls_key the port serves TLS only "
          "(env TENSORD_TLS_CERT)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert (env TENSORD_TLS_KEY)");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificate(s): clients must present a certificate it signed (mutual TLS) "
          "(env TENSORD_TLS_CLIENT_CA)");
ABSL_FLAG(std::string, auth_tokens, "",
          "file of bearer tokens, one 'TOKEN TENANT' per line, '#' comments; every Tensord "
          "call must then carry one. Re-read on SIGHUP and when it changes; a bad file keeps "
          "the tokens in use (docs/security.md) (env TENSORD_AUTH_TOKENS)");
ABSL_FLAG(absl::Duration, auth_tokens_poll_interval, absl::Seconds(1),
          "how often the --auth_tokens file is checked for changes, e.g. 1s or 200ms; 0 = "
          "never, reload on SIGHUP only (env TENSORD_AUTH_TOKENS_POLL_INTERVAL)");
ABSL_FLAG(tensord::CertTenantField, tenant_from_cert, tensord::CertTenantField::kNone,
          "with mutual TLS, take each caller's tenant from its client certificate: san-uri "
          "(a URI SAN ending in /tenant/NAME, e.g. spiffe://example.org/tenant/NAME), cn (the "
          "subject CN) or none; with --auth_tokens too, token and certificate must name the "
          "same tenant (env TENSORD_TENANT_FROM_CERT)");
ABSL_FLAG(int64_t, max_sessions_per_tenant, 64,
          "sessions one tenant may hold at once; 0 = no limit "
          "(env TENSORD_MAX_SESSIONS_PER_TENANT)");

ABSL_FLAG(int64_t, primitive_cache_capacity, 1024,
          "oneDNN primitives the CPU backend keeps built for reuse (least recently used "
          "evicted); bounds the cache's memory; 0 = none (env TENSORD_PRIMITIVE_CACHE_CAPACITY)");
ABSL_FLAG(int64_t, threads, 0,
          "threads one CPU kernel call may use (OpenMP, oneDNN); 0 = every core; set it to the "
          "container's CPU limit (env TENSORD_THREADS)");
ABSL_FLAG(std::vector<std::string>, devices, {},
          "accelerator devices to serve, comma-separated (opencl:0,opencl:1); empty = every one "
          "found; the CPU is always served (env TENSORD_DEVICES)");
ABSL_FLAG(std::string, metrics_address, "",
          "host:port serving Prometheus metrics at /metrics over plain HTTP, e.g. 0.0.0.0:9464; "
          "empty = off (env TENSORD_METRICS_ADDRESS)");
ABSL_FLAG(std::string, fusion, "on",
          "on: compiled programs, and Execute batches where the product's and the post-ops' "
          "outputs are discarded, fuse a product (linear, matmul, conv2d, conv3d) with the bias, "
          "activation and residual add after it; off: every call runs as written "
          "(env TENSORD_FUSION)");
ABSL_FLAG(std::string, log_level, "info",
          "debug, info (a line per RPC), warning (failed RPCs), error or off "
          "(env TENSORD_LOG_LEVEL)");
ABSL_FLAG(std::string, log_format, "json",
          "json (one object per line, for collectors) or text (for people) "
          "(env TENSORD_LOG_FORMAT)");

namespace {

// Sets each flag from its environment variable before the command line is parsed, so the
// command line overrides the environment and both go through the flag's own parser.
bool ApplyEnvironment() {
  static const char* const kFlags[][2] = {
      {"address", "TENSORD_ADDRESS"},
      {"ttl_seconds", "TENSORD_TTL_SECONDS"},
      {"quota_bytes", "TENSORD_QUOTA_BYTES"},
      {"max_quota_bytes", "TENSORD_MAX_QUOTA_BYTES"},
      {"max_message_bytes", "TENSORD_MAX_MESSAGE_BYTES"},
      {"shutdown_grace", "TENSORD_SHUTDOWN_GRACE"},
      {"shutdown_grace_ms", "TENSORD_SHUTDOWN_GRACE_MS"},
      {"max_tensor_bytes", "TENSORD_MAX_TENSOR_BYTES"},
      {"max_rank", "TENSORD_MAX_RANK"},
      {"max_dim", "TENSORD_MAX_DIM"},
      {"max_calls_per_batch", "TENSORD_MAX_CALLS_PER_BATCH"},
      {"max_contexts_per_session", "TENSORD_MAX_CONTEXTS_PER_SESSION"},
      {"max_calls_per_program", "TENSORD_MAX_CALLS_PER_PROGRAM"},
      {"max_programs_per_session", "TENSORD_MAX_PROGRAMS_PER_SESSION"},
      {"shared_memory", "TENSORD_SHARED_MEMORY"},
      {"shared_memory_key_prefix", "TENSORD_SHARED_MEMORY_KEY_PREFIX"},
      {"max_shared_memory_regions_per_session", "TENSORD_MAX_SHARED_MEMORY_REGIONS_PER_SESSION"},
      {"collective_timeout", "TENSORD_COLLECTIVE_TIMEOUT"},
      {"collective_address", "TENSORD_COLLECTIVE_ADDRESS"},
      {"collective_rendezvous_prefix", "TENSORD_COLLECTIVE_RENDEZVOUS_PREFIX"},
      {"plugin", "TENSORD_PLUGINS"},
      {"tls_cert", "TENSORD_TLS_CERT"},
      {"tls_key", "TENSORD_TLS_KEY"},
      {"tls_client_ca", "TENSORD_TLS_CLIENT_CA"},
      {"auth_tokens", "TENSORD_AUTH_TOKENS"},
      {"auth_tokens_poll_interval", "TENSORD_AUTH_TOKENS_POLL_INTERVAL"},
      {"tenant_from_cert", "TENSORD_TENANT_FROM_CERT"},
      {"max_sessions_per_tenant", "TENSORD_MAX_SESSIONS_PER_TENANT"},
      {"primitive_cache_capacity", "TENSORD_PRIMITIVE_CACHE_CAPACITY"},
      {"threads", "TENSORD_THREADS"},
      {"metrics_address", "TENSORD_METRICS_ADDRESS"},
      {"devices", "TENSORD_DEVICES"},
      {"fusion", "TENSORD_FUSION"},
      {"log_level", "TENSORD_LOG_LEVEL"},
      {"log_format", "TENSORD_LOG_FORMAT"},
  };
  for (const auto& [flag, env] : kFlags) {
    const char* value = std::getenv(env);
    if (value == nullptr) continue;
    std::string error;
    absl::CommandLineFlag* f = absl::FindCommandLineFlag(flag);
    if (f == nullptr || !f->ParseFrom(value, &error)) {
      std::fprintf(stderr, "tensord: bad %s='%s': %s\n", env, value, error.c_str());
      return false;
    }
  }
  return true;
}

// --max-tensor-bytes=1 reads as --max_tensor_bytes=1: flag names are spelled with dashes in
// the docs and with underscores by absl; both work. Values are left alone.
std::string DashedToUnderscored(std::string arg) {
  if (arg.size() < 2 || arg[0] != '-' || arg == "--") return arg;
  const size_t start = arg.find_first_not_of('-');
  const size_t end = std::min(arg.find('='), arg.size());
  for (size_t i = start; i != std::string::npos && i < end; ++i) {
    if (arg[i] == '-') arg[i] = '_';
  }
  return arg;
}

// absl keeps only the last occurrence of a flag; --plugin may be given several times, so its
// occurrences are joined into one comma-separated --plugin before parsing.
std::vector<std::string> JoinRepeatedPlugins(int argc, char** argv) {
  std::vector<std::string> args = {argv[0]};
  std::vector<std::string> plugins;
  bool any = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = DashedToUnderscored(argv[i]);
    if (arg == "--") {
      args.insert(args.end(), argv + i, argv + argc);
      break;
    }
    const std::string name = arg.rfind("--", 0) == 0  ? arg.substr(2)
                             : arg.rfind("-", 0) == 0 ? arg.substr(1)
                                                      : "";
    if (name == "plugin" && i + 1 < argc) {
      any = true;
      plugins.push_back(argv[++i]);
    } else if (name.rfind("plugin=", 0) == 0) {
      any = true;
      plugins.push_back(name.substr(7));
    } else {
      args.push_back(std::move(arg));
    }
  }
  if (any) args.insert(args.begin() + 1, "--plugin=" + absl::StrJoin(plugins, ","));
  return args;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef NDEBUG
  // abseil, as Debian builds it, checks the order of every lock taken while another is held
  // (a lock graph updated on each op call, about 3 % of a small op's instructions). The tests
  // keep the check; the released server does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  if (!ApplyEnvironment()) return 2;
  std::vector<std::string> args = JoinRepeatedPlugins(argc, argv);
  std::vector<char*> arg_ptrs;
  for (std::string& a : args) arg_ptrs.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());

  // Signals are blocked in every thread (gRPC's inherit the mask) and taken synchronously
  // below, so shutdown and credential reloads run as ordinary code rather than inside a
  // signal handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto log_level = tensord::ParseLogLevel(absl::GetFlag(FLAGS_log_level));
  auto log_format = tensord::ParseLogFormat(absl::GetFlag(FLAGS_log_format));
  for (const absl::Status& st : {log_level.status(), log_format.status()}) {
    if (!st.ok()) {
      std::fprintf(stderr, "tensord: %s\n", std::string(st.message()).c_str());
      return 2;
    }
  }
  tensord::DefaultLog().Configure(*log_level, *log_format);
  const std::string fusion = absl::GetFlag(FLAGS_fusion);
  if (fusion != "on" && fusion != "off") {
    std::fprintf(stderr, "tensord: --fusion must be on or off, got '%s'\n", fusion.c_str());
    return 2;
  }

  tensord::ServerOptions options;
  options.address = absl::GetFlag(FLAGS_address);
  options.default_ttl_seconds = absl::GetFlag(FLAGS_ttl_seconds);
  options.default_quota_bytes = absl::GetFlag(FLAGS_quota_bytes);
  options.max_quota_bytes = absl::GetFlag(FLAGS_max_quota_bytes);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.shutdown_grace_ms = absl::GetFlag(FLAGS_shutdown_grace_ms) >= 0
                                  ? absl::GetFlag(FLAGS_shutdown_grace_ms)
                                  : absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_shutdown_grace));
  options.max_tensor_bytes = absl::GetFlag(FLAGS_max_tensor_bytes);
  options.max_rank = absl::GetFlag(FLAGS_max_rank);
  options.max_dim = absl::GetFlag(FLAGS_max_dim);
  options.max_calls_per_batch = absl::GetFlag(FLAGS_max_calls_per_batch);
  options.max_contexts_per_session = absl::GetFlag(FLAGS_max_contexts_per_session);
  options.max_calls_per_program = absl::GetFlag(FLAGS_max_calls_per_program);
  options.max_programs_per_session = absl::GetFlag(FLAGS_max_programs_per_session);
  options.shared_memory = absl::GetFlag(FLAGS_shared_memory);
  options.shared_memory_key_prefix = absl::GetFlag(FLAGS_shared_memory_key_prefix);
  options.max_shared_memory_regions_per_session =
      absl::GetFlag(FLAGS_max_shared_memory_regions_per_session);
  options.collective_timeout_ms =
      absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_collective_timeout));
  options.collective_address = absl::GetFlag(FLAGS_collective_address);
  options.fusion = fusion == "on";
  for (const std::string& prefix : absl::GetFlag(FLAGS_collective_rendezvous_prefix)) {
    if (!prefix.empty()) options.collective_rendezvous_prefixes.push_back(prefix);
  }
  for (const std::string& plugin : absl::GetFlag(FLAGS_plugin)) {
    if (!plugin.empty()) options.plugins.push_back(plugin);
  }
  options.tls_cert_path = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_path = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca_path = absl::GetFlag(FLAGS_tls_client_ca);
  options.auth_tokens_path = absl::GetFlag(FLAGS_auth_tokens);
  options.auth_tokens_poll_interval_ms =
      absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_auth_tokens_poll_interval));
  options.tenant_from_cert = absl::GetFlag(FLAGS_tenant_from_cert);
  options.max_sessions_per_tenant = absl::GetFlag(FLAGS_max_sessions_per_tenant);
  options.primitive_cache_capacity = absl::GetFlag(FLAGS_primitive_cache_capacity);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  for (const std::string& device : absl::GetFlag(FLAGS_devices)) {
    if (!device.empty()) options.devices.push_back(device);
  }
  auto server = tensord::TensordServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "tensord: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::string address = options.address;
  const size_t colon = address.rfind(':');
  if (colon != std::string::npos) {
    address = address.substr(0, colon + 1) + std::to_string((*server)->port());
  }
  std::fprintf(stderr, "tensord listening on %s (%s; %s backend, %d ops)\n", address.c_str(),
               (*server)->security_summary().c_str(),
               absl::StrJoin((*server)->backend_kinds(), "+").c_str(), (*server)->op_count());
  for (const tensord::DeviceInfo& d : (*server)->devices()) {
    std::string memory =
        d.memory_bytes > 0 ? absl::StrCat(", ", d.memory_bytes >> 20, " MiB") : std::string();
    std::string vendor = d.vendor.empty() ? std::string() : absl::StrCat(", ", d.vendor);
    std::fprintf(stderr, "tensord: device %s (%s%s%s)\n", d.name.c_str(), d.description.c_str(),
                 vendor.c_str(), memory.c_str());
  }
  for (const std::string& plugin : options.plugins) {
    std::fprintf(stderr, "tensord: loaded plugin %s\n", plugin.c_str());
  }
  if (options.shared_memory) {
    std::fprintf(stderr, "tensord: shared memory regions served (keys %s)\n",
                 options.shared_memory_key_prefix.empty()
                     ? "any: every object this user can open"
                     : absl::StrCat("starting with ", options.shared_memory_key_prefix).c_str());
  }
  if ((*server)->metrics_port() != 0) {
    std::string metrics = options.metrics_address;
    metrics = metrics.substr(0, metrics.rfind(':') + 1) + std::to_string((*server)->metrics_port());
    std::fprintf(stderr, "tensord: metrics at http://%s/metrics\n", metrics.c_str());
  }
  std::fflush(stderr);

  int signal = 0;
  // SIGHUP re-reads the token file (the outcome is logged by the reload) and serving goes on.
  while (sigwait(&signals, &signal) == 0 && signal == SIGHUP) {
    if (options.auth_tokens_path.empty()) {
      tensord::DefaultLog().Write(tensord::LogLevel::kInfo, "tokens_reload_skipped",
                                  {{"reason", "SIGHUP without --auth-tokens"}});
    }
    (*server)->ReloadCredentials().IgnoreError();
  }
  std::fprintf(stderr, "tensord: %s, shutting down\n", signal == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Shutdown();
  (*server)->Wait();
  return 0;
}
