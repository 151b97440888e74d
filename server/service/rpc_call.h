// What every Tensord call leaves behind, whatever its outcome: a request id (the client's
// `x-request-id` when it sent a usable one, a new one otherwise) echoed in the response
// metadata and in the ErrorInfo metadata of its error, the server's time in the trailing
// metadata (`server-timing`), one log line (server_log.h) and its metrics
// (service_metrics.h). A user hands an operator the id of a failed call; the operator
// finds its log line by it.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "server/service/server_log.h"
#include "server/service/service_metrics.h"

namespace tensord {

inline constexpr char kRequestIdHeader[] = "x-request-id";
// Trailing metadata of every call: "tensord;dur=<milliseconds>", the time the server spent on
// it (the syntax of HTTP's Server-Timing header).
inline constexpr char kServerTimingHeader[] = "server-timing";
// Longer ids, or ids with other characters, are replaced by a new one (and the log line says
// so): an id is echoed in metadata and logs, so it must stay short and printable.
inline constexpr size_t kMaxRequestIdBytes = 128;

// True when `id` is 1 to kMaxRequestIdBytes of [A-Za-z0-9._:/+=@-].
bool UsableRequestId(absl::string_view id);
// 32 random hex digits.
std::string NewRequestId();
// True for a W3C trace context header, version-traceid-parentid-flags in lowercase hex.
bool ValidTraceparent(absl::string_view value);
// "OK", "INVALID_ARGUMENT", ... as gRPC spells its codes.
std::string GrpcCodeName(grpc::StatusCode code);

class RpcCall {
 public:
  RpcCall(grpc::ServerContext* context, absl::string_view method, ServiceMetrics& metrics,
          ServerLog& log = DefaultLog());
  RpcCall(const RpcCall&) = delete;
  RpcCall& operator=(const RpcCall&) = delete;

  const std::string& request_id() const { return request_id_; }
  void set_tenant(absl::string_view tenant) { tenant_ = std::string(tenant); }
  void set_session(absl::string_view session_id);
  void set_ops(int64_t ops) { ops_ = ops; }
  void add_bytes_in(int64_t bytes) { bytes_in_ += bytes; }
  void add_bytes_out(int64_t bytes) { bytes_out_ += bytes; }

  // Adds request_id to an error's metadata, converts it (the one conversion,
  // grpc_status.cc), records the metrics and writes the log line.
  grpc::Status Finish(absl::Status status);

 private:
  grpc::ServerContext* const context_;
  const std::string method_;
  ServiceMetrics& metrics_;
  ServerLog& log_;
  const absl::Time start_;
  std::string request_id_;
  bool replaced_request_id_ = false;  // the client sent one that was not usable
  std::string traceparent_;
  std::string tenant_;
  std::string session_;
  int64_t ops_ = -1;  // not an Execute
  int64_t bytes_in_ = 0;
  int64_t bytes_out_ = 0;
};

}  // namespace tensord
