#include "server/core/status.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "server/core/quoted_value.h"

namespace tensord {
namespace {

constexpr char kReasonUrl[] = "tensord.dev/reason";
constexpr char kMetadataUrl[] = "tensord.dev/metadata";

struct ReasonRow {
  Reason reason;
  const char* name;
  absl::StatusCode code;
};

constexpr ReasonRow kReasons[] = {
    {Reason::kUnspecified, "ERROR_REASON_UNSPECIFIED", absl::StatusCode::kUnknown},
    {Reason::kOperationNotMarkedForAutodiff, "OPERATION_NOT_MARKED_FOR_AUTODIFF",
     absl::StatusCode::kFailedPrecondition},
    {Reason::kAutodiffContextNotEnabled, "AUTODIFF_CONTEXT_NOT_ENABLED",
     absl::StatusCode::kFailedPrecondition},
    {Reason::kUnknownOp, "UNKNOWN_OP", absl::StatusCode::kInvalidArgument},
    {Reason::kWrongArity, "WRONG_ARITY", absl::StatusCode::kInvalidArgument},
    {Reason::kBadAttribute, "BAD_ATTRIBUTE", absl::StatusCode::kInvalidArgument},
    {Reason::kShapeMismatch, "SHAPE_MISMATCH", absl::StatusCode::kInvalidArgument},
    {Reason::kDtypeMismatch, "DTYPE_MISMATCH", absl::StatusCode::kInvalidArgument},
    {Reason::kTensorNotFound, "TENSOR_NOT_FOUND", absl::StatusCode::kNotFound},
    {Reason::kSessionNotFound, "SESSION_NOT_FOUND", absl::StatusCode::kNotFound},
    {Reason::kContextNotFound, "CONTEXT_NOT_FOUND", absl::StatusCode::kNotFound},
    {Reason::kQuotaExceeded, "QUOTA_EXCEEDED", absl::StatusCode::kResourceExhausted},
    {Reason::kBackwardRootNotScalar, "BACKWARD_ROOT_NOT_SCALAR",
     absl::StatusCode::kInvalidArgument},
    {Reason::kBackwardRootNotTracked, "BACKWARD_ROOT_NOT_TRACKED",
     absl::StatusCode::kFailedPrecondition},
    {Reason::kGraphFreed, "GRAPH_FREED", absl::StatusCode::kFailedPrecondition},
    {Reason::kSavedTensorModified, "SAVED_TENSOR_MODIFIED", absl::StatusCode::kFailedPrecondition},
    {Reason::kBadOperand, "BAD_OPERAND", absl::StatusCode::kInvalidArgument},
    {Reason::kBadTensorData, "BAD_TENSOR_DATA", absl::StatusCode::kInvalidArgument},
    {Reason::kDeviceNotFound, "DEVICE_NOT_FOUND", absl::StatusCode::kNotFound},
    {Reason::kUnsupportedOnBackend, "UNSUPPORTED_ON_BACKEND", absl::StatusCode::kUnimplemented},
    {Reason::kIndexOutOfRange, "INDEX_OUT_OF_RANGE", absl::StatusCode::kOutOfRange},
    {Reason::kOutOfMemory, "OUT_OF_MEMORY", absl::StatusCode::kResourceExhausted},
    {Reason::kTransferIncomplete, "TRANSFER_INCOMPLETE", absl::StatusCode::kInvalidArgument},
    {Reason::kInvalidRequest, "INVALID_REQUEST", absl::StatusCode::kInvalidArgument},
    {Reason::kInternal, "INTERNAL", absl::StatusCode::kInternal},
    {Reason::kCancelled, "CANCELLED", absl::StatusCode::kCancelled},
    {Reason::kLimitExceeded, "LIMIT_EXCEEDED", absl::StatusCode::kResourceExhausted},
    {Reason::kUnauthenticated, "UNAUTHENTICATED", absl::StatusCode::kUnauthenticated},
    {Reason::kPermissionDenied, "PERMISSION_DENIED", absl::StatusCode::kPermissionDenied},
    {Reason::kDeviceMismatch, "DEVICE_MISMATCH", absl::StatusCode::kInvalidArgument},
    {Reason::kProgramNotFound, "PROGRAM_NOT_FOUND", absl::StatusCode::kNotFound},
    {Reason::kSharedMemoryNotFound, "SHARED_MEMORY_NOT_FOUND", absl::StatusCode::kNotFound},
    {Reason::kSharedMemoryUnavailable, "SHARED_MEMORY_UNAVAILABLE",
     absl::StatusCode::kFailedPrecondition},
    {Reason::kPeerUnavailable, "PEER_UNAVAILABLE", absl::StatusCode::kUnavailable},
    {Reason::kCollectiveMismatch, "COLLECTIVE_MISMATCH", absl::StatusCode::kInvalidArgument},
    {Reason::kGroupNotJoined, "GROUP_NOT_JOINED", absl::StatusCode::kFailedPrecondition},
};

// Shortens the long values of `metadata` in place; the message quoting them gets the same short
// forms. Values are replaced longest first, so a value that contains another is replaced whole.
std::string ShortenQuotedValues(absl::string_view message, Metadata& metadata) {
  std::vector<std::pair<std::string, std::string>> long_values;
  for (auto& [key, value] : metadata) {
    if (value.size() <= kMaxQuotedBytes) continue;
    std::string shortened = Shortened(value);
    long_values.emplace_back(std::move(value), shortened);
    value = std::move(shortened);
  }
  if (long_values.empty()) return std::string(message);
  std::sort(long_values.begin(), long_values.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::string out(message);
  for (const auto& [from, to] : long_values) out = absl::StrReplaceAll(out, {{from, to}});
  return out;
}

// `status` with another message; code and payloads are kept.
absl::Status WithMessage(const absl::Status& status, absl::string_view message) {
  absl::Status out(status.code(), message);
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace

absl::string_view ReasonName(Reason reason) {
  for (const ReasonRow& row : kReasons) {
    if (row.reason == reason) return row.name;
  }
  return "ERROR_REASON_UNSPECIFIED";
}

Reason ReasonFromName(absl::string_view name) {
  for (const ReasonRow& row : kReasons) {
    if (name == row.name) return row.reason;
  }
  return Reason::kUnspecified;
}

const std::map<Reason, absl::StatusCode>& ReasonCodes() {
  static const auto* codes = [] {
    auto* m = new std::map<Reason, absl::StatusCode>();
    for (const ReasonRow& row : kReasons) (*m)[row.reason] = row.code;
    return m;
  }();
  return *codes;
}

absl::Status Error(Reason reason, absl::string_view message, Metadata metadata) {
  absl::Status status(ReasonCodes().at(reason), message);
  status.SetPayload(kReasonUrl, absl::Cord(ReasonName(reason)));
  // WithMetadata shortens long values, in the metadata and in the message.
  if (!metadata.empty()) status = WithMetadata(std::move(status), metadata);
  return status;
}

Reason GetReason(const absl::Status& status) {
  auto payload = status.GetPayload(kReasonUrl);
  if (!payload.has_value()) return Reason::kUnspecified;
  return ReasonFromName(std::string(*payload));
}

// Metadata is stored as "key\x1fvalue\x1e..." so values may hold any printable text.
Metadata GetMetadata(const absl::Status& status) {
  Metadata out;
  auto payload = status.GetPayload(kMetadataUrl);
  if (!payload.has_value()) return out;
  for (absl::string_view entry : absl::StrSplit(std::string(*payload), '\x1e', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(entry, absl::MaxSplits('\x1f', 1));
    out.emplace(std::move(kv.first), std::move(kv.second));
  }
  return out;
}

absl::Status WithMetadata(absl::Status status, const Metadata& extra) {
  if (status.ok()) return status;
  Metadata merged = GetMetadata(status);
  Metadata added;
  for (const auto& [key, value] : extra) {
    if (merged.count(key) == 0) added.emplace(key, value);
  }
  const std::string message = ShortenQuotedValues(status.message(), added);
  if (message != status.message()) status = WithMessage(status, message);
  merged.merge(added);
  std::string encoded;
  for (const auto& [key, value] : merged) {
    encoded += key;
    encoded += '\x1f';
    // A value is user text and may hold the separators themselves; they would split it.
    for (char c : value) encoded += (c == '\x1e' || c == '\x1f') ? '?' : c;
    encoded += '\x1e';
  }
  status.SetPayload(kMetadataUrl, absl::Cord(encoded));
  return status;
}

}  // namespace tensord
