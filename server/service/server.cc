#include "server/service/server.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/core/host_memory.h"
#include "server/core/process_malloc.h"
#include "server/core/status.h"
#include "server/plugins/plugin_loader.h"
#include "server/service/auth.h"
#include "server/service/metrics_http.h"
#include "server/service/server_log.h"
#include "server/service/service_core.h"
#include "server/service/tensord_service.h"
#include "server/service/token_store.h"

namespace tensord {
namespace {

constexpr char kServiceName[] = "tensord.v1.Tensord";
// Chunks, fetches and error trailers must fit in a message: a client's default 1 MiB put
// chunk plus its framing.
constexpr int64_t kMinMessageBytes = int64_t{2} << 20;

// The transport admits messages up to twice the limit, so that a request a little over it
// reaches the handler and is refused with LIMIT_EXCEEDED naming max_message_bytes (gRPC's own
// refusal carries no details); far larger ones are still cut off by gRPC.
int TransportReceiveLimit(int64_t max_message_bytes) {
  return static_cast<int>(std::min<int64_t>(INT32_MAX, 2 * max_message_bytes));
}

// Handler threads kept waiting for calls: one spare beside a running call, and once a burst is
// over up to twice the cores, at least 8 and at most 16, so that concurrent sessions reuse their
// threads. Not more: a thread that ran a parallel region keeps its idle OpenMP team.
constexpr int kMinIdleThreads = 2;
int MaxIdleThreads() {
  return std::clamp(2 * static_cast<int>(std::thread::hardware_concurrency()), 8, 16);
}

ServiceLimits LimitsOf(const ServerOptions& o) {
  ServiceLimits limits;
  limits.max_tensor_bytes = o.max_tensor_bytes;
  limits.max_rank = o.max_rank;
  limits.max_dim = o.max_dim;
  limits.max_calls_per_batch = o.max_calls_per_batch;
  limits.max_contexts_per_session = o.max_contexts_per_session;
  limits.max_calls_per_program = o.max_calls_per_program;
  limits.max_programs_per_session = o.max_programs_per_session;
  limits.max_shared_memory_regions_per_session = o.max_shared_memory_regions_per_session;
  return limits;
}

absl::Status Validate(const ServerOptions& o) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("server: ", what));
  };
  if (o.default_ttl_seconds <= 0) {
    return bad(absl::StrCat("default TTL must be positive, got ", o.default_ttl_seconds, " s"));
  }
  if (o.default_quota_bytes <= 0 || o.max_quota_bytes < o.default_quota_bytes) {
    return bad(absl::StrCat("need 0 < default quota (", o.default_quota_bytes,
                            " bytes) <= max quota (", o.max_quota_bytes, " bytes)"));
  }
  if (o.reap_interval_ms <= 0) {
    return bad(absl::StrCat("reap interval must be positive, got ", o.reap_interval_ms, " ms"));
  }
  if (o.max_message_bytes < kMinMessageBytes || o.max_message_bytes > INT32_MAX) {
    return bad(absl::StrCat("max message size must be in [", kMinMessageBytes, ", ", INT32_MAX,
                            "] bytes, got ", o.max_message_bytes));
  }
  if (o.shutdown_grace_ms < 0) {
    return bad(
        absl::StrCat("shutdown grace must not be negative, got ", o.shutdown_grace_ms, " ms"));
  }
  if (o.threads < 0 || o.threads > 4096) {
    return bad(absl::StrCat("threads must be between 0 (every core) and 4096, got ", o.threads));
  }
  if (o.primitive_cache_capacity < 0) {
    return bad(absl::StrCat("primitive cache capacity must be >= 0 (0 = no cache), got ",
                            o.primitive_cache_capacity));
  }
  return ValidateLimits(LimitsOf(o));
}

absl::Status ValidateSecurity(const ServerOptions& o) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("server: ", what));
  };
  if (o.tls_cert_path.empty() != o.tls_key_path.empty()) {
    return bad("TLS needs both a certificate (--tls-cert) and its private key (--tls-key)");
  }
  if (!o.tls_client_ca_path.empty() && o.tls_cert_path.empty()) {
    return bad(
        "a client CA (--tls-client-ca) needs TLS: give the server's --tls-cert and --tls-key");
  }
  if (o.tenant_from_cert != CertTenantField::kNone && o.tls_client_ca_path.empty()) {
    return bad(absl::StrCat("tenants from client certificates (--tenant-from-cert=",
                            CertTenantFieldName(o.tenant_from_cert),
                            ") need mutual TLS: give --tls-client-ca, with --tls-cert and "
                            "--tls-key"));
  }
  if (o.auth_tokens_poll_interval_ms < 0) {
    return bad(absl::StrCat("the token file poll interval must be >= 0 (0 = no watching), got ",
                            o.auth_tokens_poll_interval_ms, " ms"));
  }
  if (o.max_sessions_per_tenant < 0) {
    return bad(absl::StrCat("max sessions per tenant must be >= 0 (0 = no limit), got ",
                            o.max_sessions_per_tenant));
  }
  return absl::OkStatus();
}

// The contents of a PEM file; INVALID_ARGUMENT naming the file (never its contents).
absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("server: cannot read the TLS ", what, " file ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("server: the TLS ", what, " file ", path, " is not PEM (no -----BEGIN line)"));
  }
  return text.str();
}

struct Security {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  std::unique_ptr<TokenStore> tokens;  // null: no token authentication
  std::string summary;
};

absl::StatusOr<Security> LoadSecurity(const ServerOptions& o) {
  RETURN_IF_ERROR(ValidateSecurity(o));
  Security out;
  std::string transport = "plaintext";
  if (o.tls_cert_path.empty()) {
    out.credentials = grpc::InsecureServerCredentials();
  } else {
    grpc::SslServerCredentialsOptions ssl;
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(o.tls_cert_path, "certificate"));
    ASSIGN_OR_RETURN(pair.private_key, ReadPem(o.tls_key_path, "private key"));
    ssl.pem_key_cert_pairs.push_back(std::move(pair));
    transport = "TLS";
    if (!o.tls_client_ca_path.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(o.tls_client_ca_path, "client CA"));
      ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
      transport = "mutual TLS";
    }
    out.credentials = grpc::SslServerCredentials(ssl);
  }
  if (!o.auth_tokens_path.empty()) {
    ASSIGN_OR_RETURN(
        out.tokens,
        TokenStore::Open(o.auth_tokens_path, absl::Milliseconds(o.auth_tokens_poll_interval_ms)));
  }
  if (o.tenant_from_cert != CertTenantField::kNone) {
    transport +=
        absl::StrCat(", tenants from certificate ", CertTenantFieldName(o.tenant_from_cert));
  }
  if (out.tokens == nullptr && o.tls_cert_path.empty()) {
    out.summary = "insecure: plaintext, no authentication";
  } else if (out.tokens == nullptr) {
    out.summary = absl::StrCat(transport, ", no token authentication");
  } else {
    out.summary = absl::StrCat(transport, ", ", out.tokens->Current()->size(), " bearer token(s)");
    // Still served (a TLS-terminating proxy in front is a valid setup), but said plainly.
    if (o.tls_cert_path.empty()) out.summary += " sent unencrypted";
  }
  return out;
}

}  // namespace

TensordServer::TensordServer(const ServerOptions& options, std::unique_ptr<ServiceCore> core)
    : options_(options), core_(std::move(core)) {}

absl::StatusOr<std::unique_ptr<TensordServer>> TensordServer::Start(const ServerOptions& options) {
  if (absl::Status st = Validate(options); !st.ok()) return st;
  process_malloc::Configure();
  ServiceConfig config;
  config.default_ttl_seconds = options.default_ttl_seconds;
  config.default_quota_bytes = options.default_quota_bytes;
  config.max_quota_bytes = options.max_quota_bytes;
  config.reap_interval = absl::Milliseconds(options.reap_interval_ms);
  config.max_message_bytes = options.max_message_bytes;
  config.limits = LimitsOf(options);
  config.max_sessions_per_tenant = options.max_sessions_per_tenant;
  config.backends.cpu.primitive_cache_capacity = options.primitive_cache_capacity;
  config.backends.cpu.threads = static_cast<int>(options.threads);
  config.backends.devices = options.devices;
  config.shared_memory.enabled = options.shared_memory;
  config.shared_memory.key_prefix = options.shared_memory_key_prefix;
  config.collectives.timeout = std::chrono::milliseconds(options.collective_timeout_ms);
  config.fusion = options.fusion;
  config.collectives.address = options.collective_address;
  config.collectives.rendezvous_prefixes = options.collective_rendezvous_prefixes;
  // A device asked for that the machine lacks stops the start here, before anything listens.
  RETURN_IF_ERROR(MakeBackends(config.backends).status());
  Security security;
  ASSIGN_OR_RETURN(security, LoadSecurity(options));
  if (!options.plugins.empty()) {
    ASSIGN_OR_RETURN(config.registry,
                     plugins::RegistryWithPlugins(OpRegistry::Builtin(), options.plugins));
  }
  std::unique_ptr<TensordServer> server(
      new TensordServer(options, std::make_unique<ServiceCore>(config)));
  server->tokens_ = std::move(security.tokens);
  server->service_ = std::make_unique<TensordService>(*server->core_, server->tokens_.get(),
                                                      options.tenant_from_cert);
  server->security_summary_ = security.summary;

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, security.credentials, &server->port_);
  builder.RegisterService(server->service_.get());
  for (grpc::Service* extra : options.extra_services) builder.RegisterService(extra);
  // Tensors larger than this stream in chunks, so the limit never caps a tensor's size.
  builder.SetMaxReceiveMessageSize(TransportReceiveLimit(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  // The synchronous server's handler threads: gRPC's defaults keep at most two idle, so two
  // sessions calling at once made a thread start and another exit on nearly every call.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, kMinIdleThreads);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, MaxIdleThreads());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    server->server_.reset();
    // gRPC only logs why; with TLS the likeliest cause is a key that is not the certificate's.
    return absl::UnavailableError(absl::StrCat(
        "server: cannot listen on ", options.address, " (address in use, or not a valid host:port",
        options.tls_cert_path.empty()
            ? ")"
            : "; or the TLS private key does not belong to the certificate, see the log above)"));
  }
  grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService();
  if (!options.metrics_address.empty()) {
    ServiceCore* core = server->core_.get();
    auto http = MetricsHttpServer::Start(options.metrics_address,
                                         [core] { return core->metrics().Render(); });
    if (!http.ok()) {
      server->Shutdown();
      return http.status();
    }
    server->metrics_http_ = *std::move(http);
  }
  if (health != nullptr) {
    health->SetServingStatus("", true);
    health->SetServingStatus(kServiceName, true);
  }
  DefaultLog().Write(LogLevel::kInfo, "server_started",
                     {{"address", options.address},
                      {"port", server->port_},
                      {"metrics_port", server->metrics_port()},
                      {"security", security.summary},
                      {"ops", server->op_count()},
                      {"malloc", process_malloc::Name()}});
  return server;
}

TensordServer::~TensordServer() { Shutdown(); }

void TensordServer::Shutdown() {
  absl::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ != nullptr) {
    DefaultLog().Write(LogLevel::kInfo, "server_stopping",
                       {{"port", port_},
                        {"sessions", static_cast<int64_t>(core_->sessions().size())},
                        {"grace_ms", options_.shutdown_grace_ms}});
    if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
      health->Shutdown();  // health checks report NOT_SERVING while calls drain
    }
    // A collective moving data finishes; one still waiting for its peers fails now.
    core_->sessions().AbortGroups();
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(options_.shutdown_grace_ms));
  }
  core_->sessions().StopReaper();
  // Scrapes stay answered while calls drain, so the last figures can still be collected.
  if (metrics_http_ != nullptr) metrics_http_->Stop();
}

int TensordServer::metrics_port() const {
  return metrics_http_ != nullptr ? metrics_http_->port() : 0;
}

void TensordServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

absl::Status TensordServer::ReloadCredentials() {
  if (tokens_ == nullptr) return absl::OkStatus();
  return tokens_->Reload();
}

int TensordServer::op_count() const { return core_->op_count(); }

std::vector<DeviceInfo> TensordServer::devices() const { return core_->dispatcher().Devices(); }

std::vector<std::string> TensordServer::backend_kinds() const {
  std::vector<std::string> kinds;
  std::set<std::string> seen;
  for (const DeviceInfo& d : core_->dispatcher().Devices()) {
    if (seen.insert(d.kind).second) kinds.push_back(d.kind);
  }
  return kinds;
}

}  // namespace tensord
