#include <gtest/gtest.h>

#include "server/core/shape.h"
#include "server/core/status.h"
#include "server/core/tensor.h"

namespace tensord {
namespace {

TEST(Shape, BroadcastsLikeNumpy) {
  EXPECT_EQ(*BroadcastShapes({2, 1, 3}, {4, 1}), (Shape{2, 4, 3}));
  EXPECT_EQ(*BroadcastShapes({}, {5}), (Shape{5}));
  EXPECT_EQ(*BroadcastShapes({0, 1}, {1, 3}), (Shape{0, 3}));
  auto bad = BroadcastShapes({2, 3}, {4});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(GetReason(bad.status()), Reason::kShapeMismatch);
  EXPECT_EQ(GetMetadata(bad.status()).at("shape_a"), "[2, 3]");
}

TEST(Shape, NormalizeDimAcceptsNegativeAndRejectsOutOfRange) {
  EXPECT_EQ(*NormalizeDim(-1, 3), 2);
  EXPECT_EQ(*NormalizeDim(0, 0), 0);
  EXPECT_EQ(GetReason(NormalizeDim(3, 3).status()), Reason::kBadAttribute);
}

TEST(Shape, ElementCountOverflowIsRefused) {
  auto n = CheckedNumElements({int64_t{1} << 40, int64_t{1} << 40});
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(GetReason(n.status()), Reason::kLimitExceeded);
  EXPECT_EQ(GetReason(CheckedNumElements({-2}).status()), Reason::kShapeMismatch);
}

TEST(Shape, EmptyTensorWhoseOtherDimensionsOverflowIsRefused) {
  // Zero elements, but the strides of the non-zero dimensions would not fit an int64.
  auto n = CheckedNumElements({0, int64_t{1} << 40, int64_t{1} << 40});
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(GetReason(n.status()), Reason::kLimitExceeded);
  EXPECT_EQ(*CheckedNumElements({int64_t{1} << 30, 0, int64_t{1} << 30}), 0);
  std::vector<int64_t> strides = ContiguousStrides({0, int64_t{1} << 30, int64_t{1} << 30});
  EXPECT_EQ(strides[1], int64_t{1} << 30);
  EXPECT_EQ(strides[2], 1);
}

TEST(Status, ReasonAndMetadataRoundTrip) {
  absl::Status s = Error(Reason::kTensorNotFound, "x", {{"tensor_id", "7"}});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  s = WithMetadata(s, {{"call_index", "2"}, {"tensor_id", "9"}});
  EXPECT_EQ(GetReason(s), Reason::kTensorNotFound);
  EXPECT_EQ(GetMetadata(s).at("tensor_id"), "7");  // existing keys win
  EXPECT_EQ(GetMetadata(s).at("call_index"), "2");
  for (const auto& [reason, code] : ReasonCodes()) {
    EXPECT_EQ(ReasonFromName(ReasonName(reason)), reason);
  }
}

TEST(MemoryAccount, ChargesLiveBytesAndRefusesPastQuota) {
  auto account = std::make_shared<MemoryAccount>(1000);
  {
    auto a = Tensor::Empty(DType::kF32, {100}, "cpu", account);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(account->used(), 400);
    auto b = Tensor::Empty(DType::kF64, {100}, "cpu", account);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(GetReason(b.status()), Reason::kQuotaExceeded);
    EXPECT_EQ(account->used(), 400);  // nothing allocated beyond the quota
  }
  EXPECT_EQ(account->used(), 0);
}

}  // namespace
}  // namespace tensord
