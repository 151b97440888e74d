#include "client/cpp/client.h"

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/cpp/internal.h"
#include "client/cpp/status.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace tensord::client {
namespace internal {

void Connection::Prepare(grpc::ClientContext* context) const {
  if (options.call_timeout_ms > 0) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(options.call_timeout_ms));
  }
  if (!options.auth_token.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", options.auth_token));
  }
}

}  // namespace internal

absl::StatusOr<std::string> ReadPemFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("client: cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<Client> Client::Connect(const std::string& target, const ClientOptions& options) {
  if (options.client_certificate_chain.empty() != options.client_private_key.empty()) {
    return absl::InvalidArgumentError(
        "client: mutual TLS needs both a client certificate and its private key");
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.use_tls || !options.root_certificates.empty() ||
      !options.client_certificate_chain.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.root_certificates;
    ssl.pem_cert_chain = options.client_certificate_chain;
    ssl.pem_private_key = options.client_private_key;
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  auto connection = std::make_shared<internal::Connection>();
  connection->target = target;
  connection->options = options;
  connection->channel = grpc::CreateCustomChannel(target, credentials, args);
  connection->stub = ::tensord::v1::Tensord::NewStub(connection->channel);
  if (options.connect_timeout_ms > 0 &&
      !connection->channel->WaitForConnected(
          std::chrono::system_clock::now() +
          std::chrono::milliseconds(options.connect_timeout_ms))) {
    return absl::UnavailableError(absl::StrCat("client: could not connect to ", target, " within ",
                                               options.connect_timeout_ms, " ms"));
  }
  return Client(std::move(connection));
}

absl::StatusOr<std::vector<DeviceInfo>> Client::Devices() const {
  grpc::ClientContext context;
  connection_->Prepare(&context);
  ::tensord::v1::ListDevicesResponse response;
  grpc::Status status =
      connection_->stub->ListDevices(&context, ::tensord::v1::ListDevicesRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  std::vector<DeviceInfo> out;
  for (const auto& d : response.devices()) {
    out.push_back({d.name(), d.kind(), d.description(), d.memory_bytes(), d.vendor()});
  }
  return out;
}

absl::StatusOr<std::vector<OpInfo>> Client::Ops() const {
  grpc::ClientContext context;
  connection_->Prepare(&context);
  ::tensord::v1::ListOpsResponse response;
  grpc::Status status =
      connection_->stub->ListOps(&context, ::tensord::v1::ListOpsRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return std::vector<OpInfo>(response.ops().begin(), response.ops().end());
}

absl::StatusOr<bool> Client::Health(const std::string& service) const {
  auto stub = ::grpc::health::v1::Health::NewStub(connection_->channel);
  grpc::ClientContext context;
  connection_->Prepare(&context);
  ::grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  ::grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.status() == ::grpc::health::v1::HealthCheckResponse::SERVING;
}

absl::StatusOr<Session> Client::CreateSession(const SessionOptions& options) const {
  // The session's affinity key, drawn before the server is asked, so that a balancer hashing on
  // it sends CreateSession where every later call of the session goes (docs/scaling.md).
  std::string key;
  {
    std::random_device random;
    for (int i = 0; i < 4; ++i) absl::StrAppend(&key, absl::Hex(random(), absl::kZeroPad8));
  }
  grpc::ClientContext context;
  connection_->Prepare(&context);
  context.AddMetadata(kSessionMetadataKey, key);
  ::tensord::v1::CreateSessionRequest request;
  request.set_device(options.device);
  request.set_ttl_seconds(options.ttl_seconds);
  request.set_memory_quota_bytes(options.memory_quota_bytes);
  request.set_disable_autodiff(!options.autodiff);
  request.set_float32_matmul_precision(options.float32_matmul_precision);
  ::tensord::v1::CreateSessionResponse response;
  grpc::Status status = connection_->stub->CreateSession(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return Session(
      std::make_shared<internal::SessionState>(connection_, response, true, std::move(key)));
}

absl::StatusOr<Session> Client::AttachSession(const std::string& session_id,
                                              const std::string& affinity_key) const {
  grpc::ClientContext context;
  connection_->Prepare(&context);
  if (!affinity_key.empty()) context.AddMetadata(kSessionMetadataKey, affinity_key);
  ::tensord::v1::GetSessionInfoRequest request;
  request.set_session_id(session_id);
  ::tensord::v1::GetSessionInfoResponse info;
  grpc::Status status = connection_->stub->GetSessionInfo(&context, request, &info);
  if (!status.ok()) return FromGrpcStatus(status);
  ::tensord::v1::CreateSessionResponse created;
  created.set_session_id(info.session_id());
  created.set_ttl_seconds(info.ttl_seconds());
  created.set_memory_quota_bytes(info.memory_quota_bytes());
  created.set_device(info.device());
  created.set_autodiff_enabled(info.autodiff_enabled());
  created.set_float32_matmul_precision(info.float32_matmul_precision());
  return Session(
      std::make_shared<internal::SessionState>(connection_, created, false, affinity_key));
}

const std::string& Client::target() const { return connection_->target; }

std::shared_ptr<grpc::Channel> Client::channel() const { return connection_->channel; }

}  // namespace tensord::client
