#include "client/cpp/status.h"

#include "absl/strings/cord.h"
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

}  // namespace

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

absl::Status ClientError(absl::StatusCode code, ErrorReason reason, const std::string& message,
                         std::map<std::string, std::string> metadata) {
  absl::Status out(code, message);
  google::rpc::ErrorInfo info;
  info.set_reason(::tensord::v1::ErrorReason_Name(reason));
  info.set_domain("tensord.client");
  for (auto& [key, value] : metadata) (*info.mutable_metadata())[key] = value;
  out.SetPayload(kErrorInfoUrl, absl::Cord(info.SerializeAsString()));
  return out;
}

}  // namespace tensord::client
