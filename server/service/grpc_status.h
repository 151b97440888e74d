// The one place an absl::Status becomes a grpc::Status.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace tensord {

// Code and message carry over; the details (grpc-status-details-bin trailer) are a serialized
// google.rpc.Status holding a google.rpc.ErrorInfo {reason, domain "tensord", metadata}, plus a
// google.rpc.BadRequest for INVALID_ARGUMENT and a google.rpc.ResourceInfo for NOT_FOUND.
// A status without a tensord reason gets INTERNAL for internal/unknown codes, otherwise the
// reason closest to its code.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The ErrorInfo reason ToGrpcStatus sends for a failed `status` (its own, or the closest to its
// code), e.g. "TENSOR_NOT_FOUND"; empty for OK. The call log and metrics name the same one.
std::string SentReasonName(const absl::Status& status);

}  // namespace tensord
