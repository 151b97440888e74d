#include "server/service/grpc_status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "server/core/quoted_value.h"
#include "server/core/status.h"

namespace tensord {
namespace {

constexpr char kDomain[] = "tensord";
// The message travels three times (grpc-message, google.rpc.Status.message and the BadRequest
// or ResourceInfo description, the last two base64-encoded in grpc-status-details-bin): at this
// size, with metadata values Shortened, a whole status stays near 4 KiB, under the 8 KiB that
// gRPC clients accept by default even when every byte is percent-encoded.
constexpr size_t kMaxMessageBytes = 512;

// The message, cut (on a UTF-8 boundary) to kMaxMessageBytes with its full length stated.
std::string BoundedMessage(absl::string_view message) {
  if (message.size() <= kMaxMessageBytes) return std::string(message);
  return absl::StrCat(Utf8Prefix(message, kMaxMessageBytes - 32), "...(message of ", message.size(),
                      " bytes)");
}

// For statuses that did not come through tensord::Error (a library's own absl::Status).
Reason ClosestReason(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kDeadlineExceeded:
      return Reason::kCancelled;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
      return Reason::kInvalidRequest;
    case absl::StatusCode::kPermissionDenied:
      return Reason::kPermissionDenied;
    case absl::StatusCode::kUnauthenticated:
      return Reason::kUnauthenticated;
    case absl::StatusCode::kOutOfRange:
      return Reason::kIndexOutOfRange;
    case absl::StatusCode::kResourceExhausted:
      return Reason::kLimitExceeded;
    case absl::StatusCode::kUnimplemented:
      return Reason::kUnsupportedOnBackend;
    default:
      return Reason::kInternal;
  }
}

// "calls[2].inputs[1]", "calls[0].attrs[dim]", "roots[0]": where in the request the problem is.
std::string FieldPath(const Metadata& md) {
  std::string path;
  auto get = [&md](const char* key) -> const std::string* {
    auto it = md.find(key);
    return it == md.end() ? nullptr : &it->second;
  };
  if (const std::string* k = get("call_index")) path = absl::StrCat("calls[", *k, "]");
  auto append = [&path](absl::string_view part) {
    if (!path.empty()) path += '.';
    absl::StrAppend(&path, part);
  };
  if (const std::string* a = get("attribute")) {
    append(absl::StrCat("attrs[", *a, "]"));
  } else if (const std::string* i = get("input_index")) {
    append(absl::StrCat("inputs[", *i, "]"));
  } else if (const std::string* r = get("root_index")) {
    append(absl::StrCat("roots[", *r, "]"));
  }
  return path;
}

// NOT_FOUND errors name the missing resource.
bool ResourceOf(Reason reason, const Metadata& md, google::rpc::ResourceInfo* info) {
  const char* type = nullptr;
  const char* key = nullptr;
  switch (reason) {
    case Reason::kSessionNotFound:
      type = "session", key = "session_id";
      break;
    case Reason::kTensorNotFound:
      type = "tensor", key = "tensor_id";
      break;
    case Reason::kContextNotFound:
      type = "context", key = "context_id";
      break;
    case Reason::kDeviceNotFound:
      type = "device", key = "device";
      break;
    case Reason::kProgramNotFound:
      type = "program", key = "program_id";
      break;
    case Reason::kSharedMemoryNotFound:
      type = "shared_memory", key = "region";
      break;
    default:
      return false;
  }
  info->set_resource_type(type);
  auto it = md.find(key);
  if (it != md.end()) info->set_resource_name(it->second);
  return true;
}

Reason SentReason(const absl::Status& status) {
  const Reason reason = GetReason(status);
  return reason == Reason::kUnspecified ? ClosestReason(status.code()) : reason;
}

}  // namespace

std::string SentReasonName(const absl::Status& status) {
  return status.ok() ? "" : std::string(ReasonName(SentReason(status)));
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const Reason reason = SentReason(status);
  const Metadata md = GetMetadata(status);
  const std::string message = BoundedMessage(status.message());

  google::rpc::Status rpc;
  rpc.set_code(static_cast<int>(status.code()));
  rpc.set_message(message);

  google::rpc::ErrorInfo info;
  info.set_reason(std::string(ReasonName(reason)));
  info.set_domain(kDomain);
  for (const auto& [key, value] : md) (*info.mutable_metadata())[key] = value;
  rpc.add_details()->PackFrom(info);

  if (status.code() == absl::StatusCode::kInvalidArgument) {
    google::rpc::BadRequest bad;
    auto* violation = bad.add_field_violations();
    violation->set_field(FieldPath(md));
    violation->set_description(message);
    rpc.add_details()->PackFrom(bad);
  }
  if (status.code() == absl::StatusCode::kNotFound) {
    google::rpc::ResourceInfo resource;
    if (ResourceOf(reason, md, &resource)) {
      resource.set_description(message);
      rpc.add_details()->PackFrom(resource);
    }
  }
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message,
                      rpc.SerializeAsString());
}

}  // namespace tensord
