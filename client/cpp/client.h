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
  // Transport security. Plaintext by default. TLS when use_tls is set or any PEM below is
  // given: the server's certificate is verified against root_certificates (PEM contents;
  // empty = the system roots) and its name against the target's host.
  bool use_tls = false;
  std::string root_certificates;
  // Mutual TLS: this client's certificate chain and private key (PEM contents), for a server
  // started with --tls-client-ca. Both or neither.
  std::string client_certificate_chain;
  std::string client_private_key;
  // Sent as "authorization: Bearer <token>" on every call when set (servers started with
  // --auth-tokens; see docs/security.md). Use TLS too, or the token travels in the clear.
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
  // What float32 matrix products may compute in: "highest" (f32; empty is this), "high"
  // (TensorFloat-32 on cuda devices), "medium" (bfloat16 products too); torch's
  // set_float32_matmul_precision. cpu and opencl compute in f32 whatever is allowed.
  std::string float32_matmul_precision;
};

struct DeviceInfo {
  std::string name;  // "cpu", "opencl:0", "cuda:0"
  std::string kind;  // "cpu", "opencl", "cuda"
  std::string description;
  uint64_t memory_bytes = 0;
  std::string vendor;  // "" when unknown
};

using OpInfo = ::tensord::v1::OpInfo;

// The contents of a (PEM) file, for ClientOptions; INVALID_ARGUMENT naming an unreadable path.
absl::StatusOr<std::string> ReadPemFile(const std::string& path);

class Client {
 public:
  // INVALID_ARGUMENT when only one of client_certificate_chain / client_private_key is given.
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
  // Behind a balancer, pass the affinity key the session was created with
  // (Session::affinity_key, docs/scaling.md), so the calls reach the replica that holds it.
  absl::StatusOr<Session> AttachSession(const std::string& session_id,
                                        const std::string& affinity_key = "") const;

  const std::string& target() const;
  std::shared_ptr<grpc::Channel> channel() const;

 private:
  explicit Client(std::shared_ptr<internal::Connection> connection)
      : connection_(std::move(connection)) {}
  std::shared_ptr<internal::Connection> connection_;
};

}  // namespace tensord::client
