// Errors of the tensord client. Every call returns absl::Status / absl::StatusOr. A failed
// server call keeps the server's structured details (google.rpc.ErrorInfo, BadRequest,
// ResourceInfo, carried in the grpc-status-details-bin trailer) as payloads of the
// absl::Status, so callers branch on a reason instead of parsing messages:
//
//   absl::StatusOr<Tensor> y = Matmul(a, b);
//   if (ReasonOf(y.status()) == tensord::v1::SHAPE_MISMATCH) { ... }
//   MetadataOf(y.status()).at("op");  // "matmul"
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "google/rpc/error_details.pb.h"
#include "grpcpp/support/status.h"
#include "tensord/v1/errors.pb.h"

namespace tensord::client {

using ErrorReason = ::tensord::v1::ErrorReason;

// Payload type URLs under which the decoded details are stored.
inline constexpr char kErrorInfoUrl[] = "type.googleapis.com/google.rpc.ErrorInfo";
inline constexpr char kBadRequestUrl[] = "type.googleapis.com/google.rpc.BadRequest";
inline constexpr char kResourceInfoUrl[] = "type.googleapis.com/google.rpc.ResourceInfo";

// The one grpc::Status → absl::Status conversion of the client: same code and message, with
// every understood detail message attached as a payload.
absl::Status FromGrpcStatus(const grpc::Status& status);

// The ErrorInfo of a failed call, if the status carries one.
std::optional<google::rpc::ErrorInfo> ErrorInfoOf(const absl::Status& status);
std::optional<google::rpc::BadRequest> BadRequestOf(const absl::Status& status);
std::optional<google::rpc::ResourceInfo> ResourceInfoOf(const absl::Status& status);

// ERROR_REASON_UNSPECIFIED for OK statuses and statuses without a (known) reason.
ErrorReason ReasonOf(const absl::Status& status);
// The reason as the server named it ("" when there is none); kept even for reasons newer than
// this client's copy of errors.proto.
std::string ReasonNameOf(const absl::Status& status);
std::map<std::string, std::string> MetadataOf(const absl::Status& status);

// Metadata entry of every error the client raises itself (origin=client): it never reached
// the server.
inline constexpr char kOriginKey[] = "origin";
inline constexpr char kClientOrigin[] = "client";

// The gRPC code `reason` has on the wire (docs/errors.md); kUnknown for an unknown reason.
absl::StatusCode CodeOf(ErrorReason reason);

// A mistake the client refuses itself (a released tensor, a tensor of another session, a
// closed session, data that does not fill its shape, ...), shaped exactly like the server's
// answer to the same mistake: code CodeOf(reason), ErrorInfo with `reason` and `metadata` (the
// server's keys) plus origin=client, BadRequest for INVALID_ARGUMENT and ResourceInfo for
// NOT_FOUND reasons. Its ErrorInfo domain is "tensord.client" (the server's is "tensord").
absl::Status ClientError(ErrorReason reason, const std::string& message,
                         std::map<std::string, std::string> metadata = {});

namespace internal {
// ClientError with ErrorInfo domain `domain`. A refusal that gives the server's own answer
// early (a released, undefined or foreign handle; a closed session) keeps the domain "tensord"
// its callers saw when the server gave it; checks that only exist in the client keep
// "tensord.client". Both carry origin=client.
absl::Status ClientErrorIn(const std::string& domain, ErrorReason reason,
                           const std::string& message, std::map<std::string, std::string> metadata);
}  // namespace internal

}  // namespace tensord::client
