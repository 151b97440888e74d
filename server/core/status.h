// Error helpers: one error type (absl::Status) flows through every layer. A tensord error
// carries a machine-readable reason and string metadata as status payloads so that the
// service layer can turn them into google.rpc.ErrorInfo without parsing messages.
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord {

// Mirrors tensord.v1.ErrorReason (proto/tensord/v1/errors.proto); numbers must match.
enum class Reason : int {
  kUnspecified = 0,
  kOperationNotMarkedForAutodiff = 1,
  kAutodiffContextNotEnabled = 2,
  kUnknownOp = 3,
  kWrongArity = 4,
  kBadAttribute = 5,
  kShapeMismatch = 6,
  kDtypeMismatch = 7,
  kTensorNotFound = 8,
  kSessionNotFound = 9,
  kContextNotFound = 10,
  kQuotaExceeded = 11,
  kBackwardRootNotScalar = 12,
  kBackwardRootNotTracked = 13,
  kGraphFreed = 14,
  kSavedTensorModified = 15,
  kBadOperand = 16,
  kBadTensorData = 17,
  kDeviceNotFound = 18,
  kUnsupportedOnBackend = 19,
  kIndexOutOfRange = 20,
  kOutOfMemory = 21,
  kTransferIncomplete = 22,
  kInvalidRequest = 23,
  kInternal = 24,
  kCancelled = 25,
  kLimitExceeded = 27,
  kUnauthenticated = 28,
  kPermissionDenied = 29,
  kDeviceMismatch = 30,
  kProgramNotFound = 31,
  kSharedMemoryNotFound = 32,
  kSharedMemoryUnavailable = 33,
  kPeerUnavailable = 34,
  kCollectiveMismatch = 35,
  kGroupNotJoined = 36,
};

// Name as in the proto enum, e.g. "OPERATION_NOT_MARKED_FOR_AUTODIFF".
absl::string_view ReasonName(Reason reason);
// Inverse of ReasonName; kUnspecified when unknown.
Reason ReasonFromName(absl::string_view name);
// Every reason, for documentation checks and exhaustive tests.
const std::map<Reason, absl::StatusCode>& ReasonCodes();

using Metadata = std::map<std::string, std::string>;

// Builds an error whose code is the canonical code of `reason`.
absl::Status Error(Reason reason, absl::string_view message, Metadata metadata = {});
Reason GetReason(const absl::Status& status);
Metadata GetMetadata(const absl::Status& status);
// Returns `status` with extra metadata merged in (existing keys are kept).
absl::Status WithMetadata(absl::Status status, const Metadata& extra);

}  // namespace tensord

#define TENSORD_CONCAT_INNER(a, b) a##b
#define TENSORD_CONCAT(a, b) TENSORD_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)    \
  do {                           \
    ::absl::Status _st = (expr); \
    if (!_st.ok()) return _st;   \
  } while (0)

// Declares or assigns `lhs`; expands to several statements, so brace it under an `if`.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(TENSORD_CONCAT(_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
