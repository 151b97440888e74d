// Client: a connection to a tensord server. Cheap to copy (copies share the channel).
//
//   absl::StatusOr<Client> client = Client::Connect("127.0.0.1:50051");
//   absl::StatusOr<Session> session = client->CreateSession();
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cpp/session.h"
#include "tensord/v1/ops.pb.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace tensord::client {

namespace internal {
struct Connection;
}  // namespace internal

struct ClientOptions {
  // Transport security. Insecure by default; with use_tls the channel uses TLS with
  // root_certificates (PEM; empty = the system roots).
  bool use_tls = false;
  std::string root_certificates;
  // Sent as "authorization: Bearer <token>" on every call when set.
  std::string auth_token;
  // Deadline of every call; 0 = none.
  int64_t call_timeout_ms = 0;
  // When > 0, Connect waits this long for the channel to be ready and fails with UNAVAILABLE
  // otherwise; 0 = connect lazily on the first call.
  int64_t connect_timeout_ms = 0;
  // Largest message in either direction (fetched values, literals, stream chunks).
  int max_message_bytes = 80 << 20;
};

struct SessionOptions {
  std::string device;               // default device for creation ops; empty = "cpu"
  uint64_t ttl_seconds = 0;         // idle time before collection; 0 = server default
  uint64_t memory_quota_bytes = 0;  // 0 = server default
  bool autodiff = true;             // false: an inference-only session
};

struct DeviceInfo {
  std::string name;  // "cpu", "cuda:0"
  std::string kind;
  std::string description;
  uint64_t memory_bytes = 0;
};

using OpInfo = ::tensord::v1::OpInfo;

class Client {
 public:
  static absl::StatusOr<Client> Connect(const std::string& target,
                                        const ClientOptions& options = {});

  absl::StatusOr<std::vector<DeviceInfo>> Devices() const;
  // Every op the server serves, sorted by name: arity, attributes, dtypes, backends, marking.
  absl::StatusOr<std::vector<OpInfo>> Ops() const;
  // grpc.health.v1 Check: true when the server reports SERVING for `service` ("" = overall).
  absl::StatusOr<bool> Health(const std::string& service = "") const;

  absl::StatusOr<Session> CreateSession(const SessionOptions& options = {}) const;
  // A Session object for an existing session id (e.g. from `tensordctl session create`). It
  // does not close the session when it goes. Fails with SESSION_NOT_FOUND for an unknown id.
  absl::StatusOr<Session> AttachSession(const std::string& session_id) const;

  const std::string& target() const;
  std::shared_ptr<grpc::Channel> channel() const;

 private:
  explicit Client(std::shared_ptr<internal::Connection> connection)
      : connection_(std::move(connection)) {}
  std::shared_ptr<internal::Connection> connection_;
};

}  // namespace tensord::client
