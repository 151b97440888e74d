// The tensord gRPC server: the Tensord service, the standard health service and server
// reflection, on one port: plaintext, TLS, or mutual TLS, with optional bearer tokens
// (docs/security.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/backends/backend.h"
#include "server/service/cert_tenant.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace tensord {

class MetricsHttpServer;
class ServiceCore;
class TensordService;
class TokenStore;

struct ServerOptions {
  std::string address = "127.0.0.1:50051";  // "127.0.0.1:0" picks a free port
  int64_t default_ttl_seconds = 600;
  int64_t default_quota_bytes = int64_t{4} << 30;
  int64_t max_quota_bytes = int64_t{64} << 30;
  int64_t reap_interval_ms = 1000;       // how often expired sessions are collected
  int64_t max_message_bytes = 64 << 20;  // gRPC send/receive limit
  // Shutdown waits this long for in-flight calls, then cancels them.
  int64_t shutdown_grace_ms = 5000;
  // What one request may make the server create; each refusal is LIMIT_EXCEEDED naming the
  // limit (docs/limits.md). One tensor's bytes, its rank and any one dimension:
  int64_t max_tensor_bytes = int64_t{16} << 30;
  int64_t max_rank = 32;
  int64_t max_dim = int64_t{1} << 34;
  // Calls in one Execute batch, and autodiff contexts open at once in one session.
  int64_t max_calls_per_batch = 10000;
  int64_t max_contexts_per_session = 256;
  // Calls of one program, and programs held at once by one session.
  int64_t max_calls_per_program = 10000;
  int64_t max_programs_per_session = 256;
  // Same-host shared memory (docs/shared-memory.md), off by default: a client that may
  // register a region may read and write any POSIX shared memory object this server's user
  // can open. A non-empty prefix limits registration to keys starting with it.
  bool shared_memory = false;
  std::string shared_memory_key_prefix;
  int64_t max_shared_memory_regions_per_session = 64;
  // Process groups (JoinGroup): how long a rank waits for its peers, and the address they
  // reach this server's collectives at (empty: the host name).
  int64_t collective_timeout_ms = 60000;
  std::string collective_address;
  std::vector<std::string> collective_rendezvous_prefixes;  // empty: any rendezvous
  // Compiled programs and Execute batches fuse products with the pointwise ops after them.
  bool fusion = true;
  // More services on the same port (benchmark baselines); not owned, must outlive the server.
  std::vector<grpc::Service*> extra_services;
  // Custom-op plugins (shared libraries, see docs/plugins.md) whose ops this server adds to
  // the built-in catalog. Start fails, naming the plugin, when one cannot be loaded.
  std::vector<std::string> plugins;

  // Transport security (PEM files). With tls_cert_path and tls_key_path the port serves TLS
  // only; with tls_client_ca_path as well, a client must present a certificate signed by that
  // CA (mutual TLS) or the handshake fails. All empty: plaintext.
  std::string tls_cert_path;
  std::string tls_key_path;
  std::string tls_client_ca_path;
  // Bearer tokens ("TOKEN TENANT" per line, see TokenTable::Parse). When set, every call of the
  // Tensord service must carry "authorization: Bearer <token>"; health and reflection stay
  // open. Empty: no token authentication. The file is re-read by ReloadCredentials() and,
  // with a positive poll interval, whenever it changes; 0 = only by ReloadCredentials().
  std::string auth_tokens_path;
  int64_t auth_tokens_poll_interval_ms = 1000;
  // With mutual TLS, the certificate field that names a caller's tenant (cert_tenant.h). With
  // tokens as well, a call's token and certificate must name the same tenant. kNone: tenants
  // come from tokens alone (or every caller is the one anonymous tenant).
  CertTenantField tenant_from_cert = CertTenantField::kNone;
  // Sessions one tenant may hold at once (0 = no limit).
  int64_t max_sessions_per_tenant = 64;
  // oneDNN primitives the CPU backend keeps built (docs/limits.md); 0 = none.
  int64_t primitive_cache_capacity = 1024;
  // Threads one CPU kernel call may use (docs/limits.md); 0 = every core.
  int64_t threads = 0;
  // Accelerator devices to serve ("opencl:0"); empty = every one found. The CPU is always
  // served. Naming a device the machine lacks stops the start with DEVICE_NOT_FOUND.
  std::vector<std::string> devices;
  // "host:port" of the Prometheus /metrics endpoint (plain HTTP); empty = none. Port 0 picks
  // a free one (metrics_port() tells which).
  std::string metrics_address;
};

class TensordServer {
 public:
  // INVALID_ARGUMENT for inconsistent options or a plugin that cannot be loaded; UNAVAILABLE
  // when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<TensordServer>> Start(const ServerOptions& options);
  ~TensordServer();  // Shutdown()
  TensordServer(const TensordServer&) = delete;
  TensordServer& operator=(const TensordServer&) = delete;

  int port() const { return port_; }  // the bound port
  int metrics_port() const;           // the /metrics port, 0 without --metrics-address
  // Stops accepting, finishes in-flight calls (cancelling those still running after the
  // grace period), stops the reaper. Idempotent; safe from any thread.
  void Shutdown();
  void Wait();

  // For the start-up line: served ops (internal helpers excluded) and backend kinds.
  int op_count() const;
  // "insecure (plaintext, no authentication)", "TLS, 3 bearer tokens", "mutual TLS, ...".
  std::string security_summary() const { return security_summary_; }

  // Re-reads the --auth-tokens file (on SIGHUP in tensord): calls after it returns see the new
  // tokens; on an error (the file unreadable or malformed, named in the status and the log,
  // never a token) the tokens in use stay. OK and nothing done without a token file.
  absl::Status ReloadCredentials();
  std::vector<std::string> backend_kinds() const;
  // The devices served (name, kind, description, vendor, memory), as ListDevices reports.
  std::vector<DeviceInfo> devices() const;

 private:
  TensordServer(const ServerOptions& options, std::unique_ptr<ServiceCore> core);

  const ServerOptions options_;
  std::unique_ptr<ServiceCore> core_;
  std::unique_ptr<TokenStore> tokens_;  // null without --auth-tokens; outlives service_
  std::unique_ptr<TensordService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;
  int port_ = 0;
  std::string security_summary_;
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace tensord
