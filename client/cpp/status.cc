#include "client/cpp/status.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/status.pb.h"

namespace tensord::client {
namespace {

template <typename Message>
std::optional<Message> PayloadOf(const absl::Status& status, const char* url) {
  auto payload = status.GetPayload(url);
  if (!payload) return std::nullopt;
  Message message;
  if (!message.ParseFromString(std::string(*payload))) return std::nullopt;
  return message;
}

// "calls[2].inputs[1]", "roots[0]": the BadRequest field the server names for the metadata.
std::string FieldPath(const std::map<std::string, std::string>& md) {
  std::string path;
  if (auto k = md.find("call_index"); k != md.end()) path = absl::StrCat("calls[", k->second, "]");
  for (const auto& [key, name] : {std::pair<const char*, const char*>{"attribute", "attrs"},
                                  {"input_index", "inputs"},
                                  {"root_index", "roots"}}) {
    if (auto it = md.find(key); it != md.end()) {
      absl::StrAppend(&path, path.empty() ? "" : ".", name, "[", it->second, "]");
      break;
    }
  }
  return path;
}

}  // namespace

absl::StatusCode CodeOf(ErrorReason reason) {
  using absl::StatusCode;
  namespace v1 = ::tensord::v1;
  // The server's table is server/core/status.cc; tests/service/client_errors_test.cc checks
  // that this one agrees with it for every reason.
  switch (reason) {
    case v1::OPERATION_NOT_MARKED_FOR_AUTODIFF:
    case v1::AUTODIFF_CONTEXT_NOT_ENABLED:
    case v1::BACKWARD_ROOT_NOT_TRACKED:
    case v1::GRAPH_FREED:
    case v1::SAVED_TENSOR_MODIFIED:
    case v1::SHARED_MEMORY_UNAVAILABLE:
    case v1::GROUP_NOT_JOINED:
      return StatusCode::kFailedPrecondition;
    case v1::UNKNOWN_OP:
    case v1::WRONG_ARITY:
    case v1::BAD_ATTRIBUTE:
    case v1::SHAPE_MISMATCH:
    case v1::DTYPE_MISMATCH:
    case v1::BACKWARD_ROOT_NOT_SCALAR:
    case v1::BAD_OPERAND:
    case v1::BAD_TENSOR_DATA:
    case v1::TRANSFER_INCOMPLETE:
    case v1::INVALID_REQUEST:
    case v1::DEVICE_MISMATCH:
    case v1::COLLECTIVE_MISMATCH:
      return StatusCode::kInvalidArgument;
    case v1::TENSOR_NOT_FOUND:
    case v1::SESSION_NOT_FOUND:
    case v1::CONTEXT_NOT_FOUND:
    case v1::DEVICE_NOT_FOUND:
    case v1::PROGRAM_NOT_FOUND:
    case v1::SHARED_MEMORY_NOT_FOUND:
      return StatusCode::kNotFound;
    case v1::QUOTA_EXCEEDED:
    case v1::OUT_OF_MEMORY:
    case v1::LIMIT_EXCEEDED:
      return StatusCode::kResourceExhausted;
    case v1::UNSUPPORTED_ON_BACKEND:
      return StatusCode::kUnimplemented;
    case v1::INDEX_OUT_OF_RANGE:
      return StatusCode::kOutOfRange;
    case v1::INTERNAL:
      return StatusCode::kInternal;
    case v1::CANCELLED:
      return StatusCode::kCancelled;
    case v1::UNAUTHENTICATED:
      return StatusCode::kUnauthenticated;
    case v1::PERMISSION_DENIED:
      return StatusCode::kPermissionDenied;
    case v1::PEER_UNAVAILABLE:
      return StatusCode::kUnavailable;
    default:
      return StatusCode::kUnknown;
  }
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  google::rpc::Status details;
  if (status.error_details().empty() || !details.ParseFromString(status.error_details())) {
    return out;
  }
  for (const google::protobuf::Any& any : details.details()) {
    // Only messages this client understands are kept; their wire bytes are stored unchanged.
    if (any.Is<google::rpc::ErrorInfo>()) {
      out.SetPayload(kErrorInfoUrl, absl::Cord(any.value()));
    } else if (any.Is<google::rpc::BadRequest>()) {
      out.SetPayload(kBadRequestUrl, absl::Cord(any.value()));
    } else if (any.Is<google::rpc::ResourceInfo>()) {
      out.SetPayload(kResourceInfoUrl, absl::Cord(any.value()));
    }
  }
  return out;
}

std::optional<google::rpc::ErrorInfo> ErrorInfoOf(const absl::Status& status) {
  return PayloadOf<google::rpc::ErrorInfo>(status, kErrorInfoUrl);
}

std::optional<google::rpc::BadRequest> BadRequestOf(const absl::Status& status) {
  return PayloadOf<google::rpc::BadRequest>(status, kBadRequestUrl);
}

std::optional<google::rpc::ResourceInfo> ResourceInfoOf(const absl::Status& status) {
  return PayloadOf<google::rpc::ResourceInfo>(status, kResourceInfoUrl);
}

ErrorReason ReasonOf(const absl::Status& status) {
  ErrorReason reason = ::tensord::v1::ERROR_REASON_UNSPECIFIED;
  std::optional<google::rpc::ErrorInfo> info = ErrorInfoOf(status);
  if (info && ::tensord::v1::ErrorReason_Parse(info->reason(), &reason)) return reason;
  return ::tensord::v1::ERROR_REASON_UNSPECIFIED;
}

std::string ReasonNameOf(const absl::Status& status) {
  std::optional<google::rpc::ErrorInfo> info = ErrorInfoOf(status);
  return info ? info->reason() : std::string();
}

std::map<std::string, std::string> MetadataOf(const absl::Status& status) {
  std::map<std::string, std::string> out;
  if (std::optional<google::rpc::ErrorInfo> info = ErrorInfoOf(status)) {
    out.insert(info->metadata().begin(), info->metadata().end());
  }
  return out;
}

absl::Status ClientError(ErrorReason reason, const std::string& message,
                         std::map<std::string, std::string> metadata) {
  return internal::ClientErrorIn("tensord.client", reason, message, std::move(metadata));
}

absl::Status internal::ClientErrorIn(const std::string& domain, ErrorReason reason,
                                     const std::string& message,
                                     std::map<std::string, std::string> metadata) {
  metadata[kOriginKey] = kClientOrigin;
  const absl::StatusCode code = CodeOf(reason);
  absl::Status out(code, message);
  google::rpc::ErrorInfo info;
  info.set_reason(::tensord::v1::ErrorReason_Name(reason));
  info.set_domain(domain);
  for (auto& [key, value] : metadata) (*info.mutable_metadata())[key] = value;
  out.SetPayload(kErrorInfoUrl, absl::Cord(info.SerializeAsString()));
  if (code == absl::StatusCode::kInvalidArgument) {
    google::rpc::BadRequest bad;
    google::rpc::BadRequest::FieldViolation* violation = bad.add_field_violations();
    violation->set_field(FieldPath(metadata));
    violation->set_description(message);
    out.SetPayload(kBadRequestUrl, absl::Cord(bad.SerializeAsString()));
  }
  // NOT_FOUND reasons name their resource, as the server's do.
  static const auto* const kResources =
      new std::map<ErrorReason, std::pair<const char*, const char*>>{
          {::tensord::v1::SESSION_NOT_FOUND, {"session", "session_id"}},
          {::tensord::v1::TENSOR_NOT_FOUND, {"tensor", "tensor_id"}},
          {::tensord::v1::CONTEXT_NOT_FOUND, {"context", "context_id"}},
          {::tensord::v1::PROGRAM_NOT_FOUND, {"program", "program_id"}},
          {::tensord::v1::SHARED_MEMORY_NOT_FOUND, {"shared_memory", "region"}},
          {::tensord::v1::DEVICE_NOT_FOUND, {"device", "device"}}};
  if (auto r = kResources->find(reason); r != kResources->end()) {
    google::rpc::ResourceInfo resource;
    resource.set_resource_type(r->second.first);
    if (auto name = metadata.find(r->second.second); name != metadata.end()) {
      resource.set_resource_name(name->second);
    }
    resource.set_description(message);
    out.SetPayload(kResourceInfoUrl, absl::Cord(resource.SerializeAsString()));
  }
  return out;
}

}  // namespace tensord::client
