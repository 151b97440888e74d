// Every error reason is documented in docs/errors.md with its gRPC code.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server/core/status.h"
#include "tests/support/source_path.h"

namespace tensord {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* CodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case absl::StatusCode::kNotFound:
      return "NOT_FOUND";
    case absl::StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case absl::StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case absl::StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case absl::StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case absl::StatusCode::kInternal:
      return "INTERNAL";
    case absl::StatusCode::kCancelled:
      return "CANCELLED";
    case absl::StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
    case absl::StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case absl::StatusCode::kUnavailable:
      return "UNAVAILABLE";
    default:
      return "UNKNOWN";
  }
}

TEST(ErrorsDoc, EveryReasonHasARowWithItsCode) {
  const std::string doc = ReadFile(testing::SourcePath("docs/errors.md"));
  ASSERT_FALSE(doc.empty());
  for (const auto& [reason, code] : ReasonCodes()) {
    if (reason == Reason::kUnspecified) continue;
    const std::string name(ReasonName(reason));
    const std::string row = "| " + name + " | " + CodeName(code) + " |";
    const std::string section = "### " + name + "\n- **Code:** " + CodeName(code);
    EXPECT_TRUE(doc.find(row) != std::string::npos || doc.find(section) != std::string::npos)
        << name << " (" << CodeName(code) << ") is not documented";
  }
}

TEST(ErrorsDoc, ProtoEnumMatchesTheReasonTable) {
  const std::string proto = ReadFile(testing::SourcePath("proto/tensord/v1/errors.proto"));
  for (const auto& [reason, code] : ReasonCodes()) {
    const std::string entry =
        std::string(ReasonName(reason)) + " = " + std::to_string(static_cast<int>(reason)) + ";";
    EXPECT_NE(proto.find(entry), std::string::npos) << entry;
  }
}

}  // namespace
}  // namespace tensord
