#include "server/service/rpc_call.h"

#include <algorithm>
#include <cstdint>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "server/core/quoted_value.h"
#include "server/core/status.h"
#include "server/service/grpc_status.h"

namespace tensord {
namespace {

// The one value of a client metadata key; empty when absent or sent more than once.
std::string SingleHeader(const grpc::ServerContext& context, absl::string_view key) {
  const auto& metadata = context.client_metadata();
  const auto range = metadata.equal_range(grpc::string_ref(key.data(), key.size()));
  if (range.first == range.second || std::next(range.first) != range.second) return "";
  return std::string(range.first->second.data(), range.first->second.size());
}

bool LowerHex(absl::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && (c < 'a' || c > 'f')) return false;
  }
  return true;
}

LogLevel LevelOf(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return LogLevel::kInfo;
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::DATA_LOSS:
      return LogLevel::kError;  // the server's own fault: someone should look
    default:
      return LogLevel::kWarning;
  }
}

// "tensord;dur=1.234": the milliseconds to the microsecond, as "%.3f" prints them (formatted
// by hand: this runs once per call).
std::string ServerTiming(absl::Duration took) {
  const int64_t micros = std::max<int64_t>(0, absl::ToInt64Nanoseconds(took) + 500) / 1000;
  const int64_t frac = micros % 1000;
  const char digits[3] = {static_cast<char>('0' + frac / 100),
                          static_cast<char>('0' + frac / 10 % 10),
                          static_cast<char>('0' + frac % 10)};
  return absl::StrCat("tensord;dur=", micros / 1000, ".", absl::string_view(digits, 3));
}

}  // namespace

bool UsableRequestId(absl::string_view id) {
  if (id.empty() || id.size() > kMaxRequestIdBytes) return false;
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        absl::string_view("._:/+=@-").find(c) == absl::string_view::npos) {
      return false;
    }
  }
  return true;
}

std::string NewRequestId() {
  // Unique, not secret: a per-thread generator, seeded from the OS, is enough.
  thread_local absl::BitGen gen;
  return absl::StrCat(absl::Hex(absl::Uniform<uint64_t>(gen), absl::kZeroPad16),
                      absl::Hex(absl::Uniform<uint64_t>(gen), absl::kZeroPad16));
}

bool ValidTraceparent(absl::string_view value) {
  std::vector<absl::string_view> parts = absl::StrSplit(value, '-');
  if (parts.size() != 4 || !LowerHex(parts[0], 2) || parts[0] == "ff" || !LowerHex(parts[1], 32) ||
      !LowerHex(parts[2], 16) || !LowerHex(parts[3], 2)) {
    return false;
  }
  // All-zero trace and parent ids are invalid by the spec.
  return parts[1] != std::string(32, '0') && parts[2] != std::string(16, '0');
}

std::string GrpcCodeName(grpc::StatusCode code) {
  // gRPC's codes and absl's share numbers and names ("NOT_FOUND", "UNAUTHENTICATED").
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

RpcCall::RpcCall(grpc::ServerContext* context, absl::string_view method, ServiceMetrics& metrics,
                 ServerLog& log)
    : context_(context), method_(method), metrics_(metrics), log_(log), start_(absl::Now()) {
  std::string sent = SingleHeader(*context_, kRequestIdHeader);
  if (UsableRequestId(sent)) {
    request_id_ = std::move(sent);
  } else {
    replaced_request_id_ = !sent.empty() || context_->client_metadata().count(kRequestIdHeader);
    request_id_ = NewRequestId();
  }
  std::string traceparent = SingleHeader(*context_, "traceparent");
  if (ValidTraceparent(traceparent)) traceparent_ = std::move(traceparent);
  // Initial metadata goes out with the first response message (or the status), so it is set
  // before a streaming handler writes anything.
  context_->AddInitialMetadata(kRequestIdHeader, request_id_);
}

void RpcCall::set_session(absl::string_view session_id) { session_ = Shortened(session_id); }

grpc::Status RpcCall::Finish(absl::Status status) {
  const std::string reason = SentReasonName(status);
  const std::string message = status.ok() ? "" : std::string(status.message());
  if (!status.ok()) {
    status = WithMetadata(std::move(status), {{"request_id", request_id_}});
  }
  grpc::Status out = ToGrpcStatus(status);
  const absl::Duration took = absl::Now() - start_;
  // The server's own time for the call, as HTTP's Server-Timing header gives it: a client sees
  // what of its round trip the server spent (the request parsed before, the response written
  // after, are the transport's).
  context_->AddTrailingMetadata(kServerTimingHeader, ServerTiming(took));
  metrics_.RecordRpc(method_, GrpcCodeName(out.error_code()), reason, took, bytes_in_, bytes_out_);
  const LogLevel level = LevelOf(out.error_code());
  if (log_.Enabled(level)) {
    log_.Write(level, "rpc",
               {{"request_id", request_id_},
                {"method", method_},
                {"tenant", tenant_},
                {"session", session_},
                ops_ >= 0 ? LogField("ops", ops_) : LogField("ops", ""),
                {"code", GrpcCodeName(out.error_code())},
                {"reason", reason},
                {"error", Utf8Prefix(message, 512)},
                {"duration_ms", absl::ToDoubleMilliseconds(took)},
                {"bytes_in", bytes_in_},
                {"bytes_out", bytes_out_},
                {"peer", context_->peer()},
                {"traceparent", traceparent_},
                replaced_request_id_ ? LogField("request_id_replaced", true)
                                     : LogField("request_id_replaced", "")});
  }
  return out;
}

}  // namespace tensord
