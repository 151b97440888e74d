// The limit checks themselves: shapes against rank, dims, element-count and byte overflow and
// tensor bytes; the per-allocation bound of a session's memory account; server options.
#include "server/service/limits.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "server/core/status.h"
#include "server/core/tensor.h"
#include "server/service/server.h"

namespace tensord {
namespace {

ServiceLimits Small() {
  ServiceLimits l;
  l.max_tensor_bytes = 1000;
  l.max_rank = 3;
  l.max_dim = 500;
  return l;
}

std::string LimitOf(const absl::Status& s) {
  Metadata md = GetMetadata(s);
  return absl::StrCat(ReasonName(GetReason(s)), " ", md["limit"], " ", md["value"], "/", md["max"]);
}

TEST(CheckTensorLimits, EachLimitNamesItselfWithValueAndMax) {
  const ServiceLimits l = Small();
  EXPECT_TRUE(CheckTensorLimits(l, DType::kF32, {250}, "put").ok());
  EXPECT_TRUE(CheckTensorLimits(l, DType::kF32, {0, 500, 500}, "put").ok()) << "empty";
  EXPECT_TRUE(CheckTensorLimits(l, DType::kF64, {}, "put").ok()) << "0-d";
  EXPECT_EQ(LimitOf(CheckTensorLimits(l, DType::kF32, {1, 1, 1, 1}, "put")),
            "LIMIT_EXCEEDED max_rank 4/3");
  EXPECT_EQ(LimitOf(CheckTensorLimits(l, DType::kF32, {0, 501}, "put")),
            "LIMIT_EXCEEDED max_dim 501/500");
  EXPECT_EQ(LimitOf(CheckTensorLimits(l, DType::kF32, {251}, "put")),
            "LIMIT_EXCEEDED max_tensor_bytes 1004/1000");
  absl::Status s = CheckTensorLimits(l, DType::kF32, {251}, "literal");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(std::string(s.message()),
            "literal: bytes of a f32 tensor of shape [251] = 1004, above the limit "
            "max_tensor_bytes = 1000");
  EXPECT_EQ(GetReason(CheckTensorLimits(l, DType::kF32, {3, -1}, "put")), Reason::kShapeMismatch);
}

TEST(CheckTensorLimits, OverflowOfElementsOrBytes) {
  ServiceLimits l;
  l.max_dim = std::numeric_limits<int64_t>::max();
  l.max_rank = 8;
  const int64_t big = int64_t{1} << 32;
  EXPECT_EQ(GetMetadata(CheckTensorLimits(l, DType::kF32, {big, big}, "put"))["limit"],
            "element_count");
  // 2^61 elements fit an int64; their bytes in f64 do not.
  EXPECT_EQ(GetMetadata(CheckTensorLimits(l, DType::kF64, {int64_t{1} << 61}, "put"))["limit"],
            "element_count");
  EXPECT_EQ(GetMetadata(CheckTensorLimits(l, DType::kF64, {int64_t{1} << 40}, "put"))["limit"],
            "max_tensor_bytes");
}

TEST(CheckTensorLimits, EmptyTensorWhoseOtherDimensionsOverflowIsRefused) {
  ServiceLimits l;  // max_dim 2^34: each dimension passes, their product does not
  const int64_t big = int64_t{1} << 34;
  absl::Status s = CheckTensorLimits(l, DType::kI64, {0, big, big}, "put");
  EXPECT_EQ(GetMetadata(s)["limit"], "element_count") << s;
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(CheckTensorLimits(l, DType::kI64, {0, big, 1 << 20}, "put").ok());
}

TEST(CheckShapeLimits, LeavesNegativeDimsToTheShapeRules) {
  EXPECT_TRUE(CheckShapeLimits(Small(), {-1, 4}, "reshape").ok()) << "reshape's -1";
  EXPECT_EQ(LimitOf(CheckShapeLimits(Small(), {-1, 501}, "reshape")),
            "LIMIT_EXCEEDED max_dim 501/500");
}

TEST(MemoryAccount, MaxChargeBoundsOneAllocationBeforeTheQuota) {
  auto account = std::make_shared<MemoryAccount>(1 << 20);
  account->set_max_charge_bytes(4096);
  absl::StatusOr<Tensor> ok = Tensor::Empty(DType::kF32, {1024}, "cpu", account);
  ASSERT_TRUE(ok.ok()) << ok.status();
  absl::StatusOr<Tensor> big = Tensor::Empty(DType::kF32, {1025}, "cpu", account);
  EXPECT_EQ(LimitOf(big.status()), "LIMIT_EXCEEDED max_tensor_bytes 4100/4096");
  EXPECT_EQ(account->used(), 4096) << "nothing was charged for the refused tensor";
}

TEST(TensorEmpty, ByteCountOverflowIsRefusedNotWrapped) {
  // 2^61 f64 elements would be 2^64 bytes: wrapped, that was a zero-byte buffer.
  absl::StatusOr<Tensor> t = Tensor::Empty(DType::kF64, {int64_t{1} << 61}, "cpu", nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(GetReason(t.status()), Reason::kLimitExceeded);
  EXPECT_EQ(GetMetadata(t.status())["limit"], "element_count");
}

TEST(ServerOptions, LimitsMustBePositiveAndTheMessageHoldAChunk) {
  ServerOptions o;
  o.address = "127.0.0.1:0";
  o.max_rank = 0;
  EXPECT_EQ(TensordServer::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_rank = 32;
  o.max_contexts_per_session = -1;
  EXPECT_EQ(TensordServer::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_contexts_per_session = 1;
  o.max_message_bytes = 1 << 20;  // a 1 MiB put chunk and its framing would not fit
  EXPECT_EQ(TensordServer::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_message_bytes = 2 << 20;
  o.shutdown_grace_ms = -5;
  EXPECT_EQ(TensordServer::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.shutdown_grace_ms = 0;
  o.primitive_cache_capacity = -1;
  EXPECT_EQ(TensordServer::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.primitive_cache_capacity = 16;
  o.threads = -1;
  EXPECT_EQ(TensordServer::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.threads = 1;
  absl::StatusOr<std::unique_ptr<TensordServer>> server = TensordServer::Start(o);
  EXPECT_TRUE(server.ok()) << server.status();
}

}  // namespace
}  // namespace tensord
