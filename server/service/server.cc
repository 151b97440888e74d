#include "server/service/server.h"

#include <chrono>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/core/status.h"
#include "server/plugins/plugin_loader.h"
#include "server/service/service_core.h"
#include "server/service/tensord_service.h"

namespace tensord {
namespace {

constexpr char kServiceName[] = "tensord.v1.Tensord";
// Chunks, fetches and error trailers must fit in a message.
constexpr int64_t kMinMessageBytes = int64_t{1} << 20;

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
  return absl::OkStatus();
}

}  // namespace

TensordServer::TensordServer(const ServerOptions& options, std::unique_ptr<ServiceCore> core)
    : options_(options), core_(std::move(core)) {}

absl::StatusOr<std::unique_ptr<TensordServer>> TensordServer::Start(const ServerOptions& options) {
  if (absl::Status st = Validate(options); !st.ok()) return st;
  ServiceConfig config;
  config.default_ttl_seconds = options.default_ttl_seconds;
  config.default_quota_bytes = options.default_quota_bytes;
  config.max_quota_bytes = options.max_quota_bytes;
  config.reap_interval = absl::Milliseconds(options.reap_interval_ms);
  config.max_message_bytes = options.max_message_bytes;
  if (!options.plugins.empty()) {
    ASSIGN_OR_RETURN(config.registry,
                     plugins::RegistryWithPlugins(OpRegistry::Builtin(), options.plugins));
  }
  std::unique_ptr<TensordServer> server(
      new TensordServer(options, std::make_unique<ServiceCore>(config)));
  server->service_ = std::make_unique<TensordService>(*server->core_);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &server->port_);
  builder.RegisterService(server->service_.get());
  for (grpc::Service* extra : options.extra_services) builder.RegisterService(extra);
  // Tensors larger than this stream in chunks, so the limit never caps a tensor's size.
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    server->server_.reset();
    return absl::UnavailableError(absl::StrCat("server: cannot listen on ", options.address,
                                               " (address in use, or not a valid host:port)"));
  }
  grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus("", true);
    health->SetServingStatus(kServiceName, true);
  }
  return server;
}

TensordServer::~TensordServer() { Shutdown(); }

void TensordServer::Shutdown() {
  absl::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ != nullptr) {
    if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
      health->Shutdown();  // health checks report NOT_SERVING while calls drain
    }
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(options_.shutdown_grace_ms));
  }
  core_->sessions().StopReaper();
}

void TensordServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

int TensordServer::op_count() const { return core_->op_count(); }

std::vector<std::string> TensordServer::backend_kinds() const {
  std::vector<std::string> kinds;
  std::set<std::string> seen;
  for (const DeviceInfo& d : core_->dispatcher().Devices()) {
    if (seen.insert(d.kind).second) kinds.push_back(d.kind);
  }
  return kinds;
}

}  // namespace tensord
