// The absl::Status → grpc::Status conversion: codes, ErrorInfo, BadRequest, ResourceInfo.
#include "server/service/grpc_status.h"

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "server/core/status.h"

namespace tensord {
namespace {

struct Decoded {
  google::rpc::Status rpc;
  google::rpc::ErrorInfo info;
  int bad_requests = 0;
  google::rpc::BadRequest bad;
  int resources = 0;
  google::rpc::ResourceInfo resource;
};

Decoded Decode(const grpc::Status& st) {
  Decoded d;
  EXPECT_TRUE(d.rpc.ParseFromString(st.error_details()));
  for (const auto& any : d.rpc.details()) {
    if (any.UnpackTo(&d.info)) continue;
    if (any.UnpackTo(&d.bad)) {
      ++d.bad_requests;
    } else if (any.UnpackTo(&d.resource)) {
      ++d.resources;
    }
  }
  return d;
}

TEST(GrpcStatusTest, OkStaysOk) { EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok()); }

TEST(GrpcStatusTest, ReasonMetadataAndFieldPath) {
  absl::Status st = WithMetadata(
      Error(Reason::kBadAttribute, "sum: attribute 'dim' out of range", {{"attribute", "dim"}}),
      {{"call_index", "3"}});
  grpc::Status g = ToGrpcStatus(st);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(g.error_message(), "sum: attribute 'dim' out of range");
  Decoded d = Decode(g);
  EXPECT_EQ(d.rpc.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(d.info.reason(), "BAD_ATTRIBUTE");
  EXPECT_EQ(d.info.domain(), "tensord");
  EXPECT_EQ(d.info.metadata().at("attribute"), "dim");
  EXPECT_EQ(d.info.metadata().at("call_index"), "3");
  ASSERT_EQ(d.bad_requests, 1);
  EXPECT_EQ(d.bad.field_violations(0).field(), "calls[3].attrs[dim]");
  EXPECT_EQ(d.resources, 0);
}

TEST(GrpcStatusTest, NotFoundNamesTheResource) {
  Decoded d = Decode(ToGrpcStatus(Error(
      Reason::kContextNotFound, "autodiff: context 9 was never opened", {{"context_id", "9"}})));
  EXPECT_EQ(d.info.reason(), "CONTEXT_NOT_FOUND");
  ASSERT_EQ(d.resources, 1);
  EXPECT_EQ(d.resource.resource_type(), "context");
  EXPECT_EQ(d.resource.resource_name(), "9");
  EXPECT_EQ(d.bad_requests, 0);
}

TEST(GrpcStatusTest, StatusesWithoutReasonGetTheClosestOne) {
  EXPECT_EQ(Decode(ToGrpcStatus(absl::InternalError("boom"))).info.reason(), "INTERNAL");
  EXPECT_EQ(Decode(ToGrpcStatus(absl::UnknownError("?"))).info.reason(), "INTERNAL");
  EXPECT_EQ(Decode(ToGrpcStatus(absl::CancelledError("x"))).info.reason(), "CANCELLED");
  EXPECT_EQ(Decode(ToGrpcStatus(absl::InvalidArgumentError("x"))).info.reason(), "INVALID_REQUEST");
  EXPECT_EQ(Decode(ToGrpcStatus(absl::ResourceExhaustedError("x"))).info.reason(),
            "LIMIT_EXCEEDED");
  grpc::Status g = ToGrpcStatus(absl::DeadlineExceededError("late"));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST(GrpcStatusTest, EveryReasonKeepsItsCode) {
  for (const auto& [reason, code] : ReasonCodes()) {
    if (reason == Reason::kUnspecified) continue;
    grpc::Status g = ToGrpcStatus(Error(reason, "x"));
    EXPECT_EQ(static_cast<int>(g.error_code()), static_cast<int>(code));
    EXPECT_EQ(Decode(g).info.reason(), ReasonName(reason));
  }
}

TEST(GrpcStatusTest, LongMessagesAreCutOnACharacterBoundaryWithTheirLength) {
  std::string text = "x";
  for (int i = 0; i < 2000; ++i) text += "\xc3\xa9";  // 2-byte characters
  grpc::Status st = ToGrpcStatus(absl::InvalidArgumentError(text));
  EXPECT_LE(st.error_message().size(), 512u);
  EXPECT_NE(st.error_message().find("(message of 4001 bytes)"), std::string::npos);
  Decoded d = Decode(st);  // parses: no half character in the string fields
  EXPECT_EQ(d.rpc.message(), st.error_message());
  EXPECT_EQ(d.bad.field_violations(0).description(), st.error_message());
}

}  // namespace
}  // namespace tensord
