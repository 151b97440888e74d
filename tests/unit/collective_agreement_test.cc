// The statements ranks exchange before a collective, and the one decision each rank derives
// from them (server/distributed/collective_agreement.h). The exchange itself runs across
// real processes in tests/python/test_collectives.py.
#include "server/distributed/collective_agreement.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tensord::distributed {
namespace {

CollectiveStatement Call(Shape shape, DType dtype = DType::kF32, std::string attrs = "op=sum") {
  CollectiveStatement s;
  s.op = "all_reduce";
  s.attrs = std::move(attrs);
  s.device = "cpu";
  s.library = "gloo";
  s.dtype = dtype;
  s.shape = std::move(shape);
  return s;
}

TEST(CollectiveAgreement, EncodesToAFixedSizeAndBack) {
  CollectiveStatement s = Call({2, 0, 7}, DType::kBF16, "op=max");
  s.device = "cuda:1";
  s.library = "nccl";
  s.new_communicator = true;
  std::string bytes = Encode(s);
  ASSERT_EQ(bytes.size(), kStatementBytes);
  absl::StatusOr<CollectiveStatement> back = Decode(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->op, "all_reduce");
  EXPECT_EQ(back->attrs, "op=max");
  EXPECT_EQ(back->dtype, DType::kBF16);
  EXPECT_EQ(back->shape, (Shape{2, 0, 7}));
  EXPECT_EQ(back->device, "cuda:1");
  EXPECT_EQ(back->library, "nccl");
  EXPECT_TRUE(back->new_communicator);
  EXPECT_EQ(back->refusal, Reason::kUnspecified);
  EXPECT_FALSE(Decode(Encode(Call({1})))->new_communicator);
}

TEST(CollectiveAgreement, ARefusalTravelsWithItsReasonMessageAndMetadata) {
  absl::Status local = Error(Reason::kAutodiffContextNotEnabled, "all_reduce: context 3 is closed",
                             {{"context_state", "closed"}, {"tensor_id", "12"}});
  absl::StatusOr<CollectiveStatement> back = Decode(Encode(Refusal("all_reduce", "cpu", local)));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->refusal, Reason::kAutodiffContextNotEnabled);
  EXPECT_EQ(back->message, "all_reduce: context 3 is closed");
  EXPECT_EQ(back->metadata.at("context_state"), "closed");
  EXPECT_EQ(back->metadata.at("tensor_id"), "12");
}

TEST(CollectiveAgreement, LongFieldsAreCutToFit) {
  Metadata md;
  for (int i = 0; i < 200; ++i) md[absl::StrCat("key", i)] = std::string(300, 'v');
  absl::Status local = Error(Reason::kShapeMismatch, std::string(5000, 'm'), md);
  std::string bytes = Encode(Refusal(std::string(500, 'o'), "cpu", local));
  ASSERT_EQ(bytes.size(), kStatementBytes);
  absl::StatusOr<CollectiveStatement> back = Decode(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->refusal, Reason::kShapeMismatch);
  EXPECT_FALSE(back->message.empty());
  EXPECT_LT(back->message.size(), 5000u);
}

TEST(CollectiveAgreement, RefusesWhatItDidNotEncode) {
  EXPECT_FALSE(Decode("short").ok());
  EXPECT_FALSE(Decode(std::string(kStatementBytes, 'x')).ok());
  std::string bytes = Encode(Call({3}));
  bytes[4] = static_cast<char>(0xff);  // an unknown reason
  bytes[5] = static_cast<char>(0xff);
  EXPECT_FALSE(Decode(bytes).ok());
}

TEST(CollectiveAgreement, ACorruptedStatementIsRefusedOrDecodedNeverReadPastItsEnd) {
  // A peer's bytes are not trusted: every byte of a statement set to values that break
  // lengths, counts, flags and enums either decodes (to a statement that encodes again) or is
  // refused; nothing is read beyond the statement (the sanitizer builds run this too).
  CollectiveStatement s = Refusal("all_reduce", "cuda:0",
                                  Error(Reason::kShapeMismatch, "shapes differ", {{"dim", "0"}}));
  s.library = "nccl";
  const std::string good = Encode(s);
  int refused = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned char v : {0x00, 0x01, 0x02, 0x7f, 0x80, 0xfe, 0xff}) {
      std::string bytes = good;
      bytes[i] = static_cast<char>(v);
      absl::StatusOr<CollectiveStatement> back = Decode(bytes);
      if (!back.ok()) {
        EXPECT_EQ(GetReason(back.status()), Reason::kInternal);
        ++refused;
        continue;
      }
      EXPECT_EQ(Encode(*back).size(), kStatementBytes);
    }
  }
  EXPECT_GT(refused, 0);
  std::string fresh = Encode(Call({1}));
  fresh[12] = 2;  // the new-communicator flag is 0 or 1
  EXPECT_FALSE(Decode(fresh).ok());
}

TEST(CollectiveAgreement, AgreeingCallsRun) {
  EXPECT_TRUE(Agree(1, "g", {Call({3}), Call({3}), Call({3})}).ok());
}

TEST(CollectiveAgreement, TheLowestRefusingRankDecidesForEveryRank) {
  std::vector<CollectiveStatement> all = {
      Call({3}),
      Refusal("all_reduce", "cpu",
              Error(Reason::kDtypeMismatch, "rank one's dtype", {{"dtype", "bool"}})),
      Refusal("all_reduce", "opencl:0",
              Error(Reason::kAutodiffContextNotEnabled, "rank two's context")),
  };
  for (int rank : {0, 2}) {
    absl::Status s = Agree(rank, "g", all);
    EXPECT_EQ(GetReason(s), Reason::kDtypeMismatch);
    Metadata md = GetMetadata(s);
    EXPECT_EQ(md["rank"], "1");
    EXPECT_EQ(md["local_rank"], absl::StrCat(rank));
    EXPECT_EQ(md["group"], "g");
    EXPECT_EQ(md["dtype"], "bool");
    EXPECT_NE(s.message().find("rank one's dtype"), absl::string_view::npos) << s;
  }
}

TEST(CollectiveAgreement, DifferentCallsAreAMismatchNamingTheField) {
  const std::vector<std::pair<CollectiveStatement, std::string>> cases = {
      {Call({4}), "shape"},
      {Call({3}, DType::kF64), "dtype"},
      {Call({3}, DType::kF32, "op=max"), "attrs"},
  };
  for (const auto& [other, field] : cases) {
    absl::Status s = Agree(0, "g", {Call({3}), Call({3}), other});
    EXPECT_EQ(GetReason(s), Reason::kCollectiveMismatch) << field;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    Metadata md = GetMetadata(s);
    EXPECT_EQ(md["field"], field);
    EXPECT_EQ(md["peer_rank"], "2");
  }
  CollectiveStatement gather = Call({3});
  gather.op = "all_gather";
  EXPECT_EQ(GetMetadata(Agree(1, "g", {Call({3}), gather}))["field"], "op");
}

TEST(CollectiveAgreement, RanksMovingTheDataWithDifferentLibrariesAreAMismatch) {
  CollectiveStatement device = Call({3});
  device.device = "cuda:0";
  device.library = "nccl";
  absl::Status s = Agree(1, "g", {device, Call({3})});
  EXPECT_EQ(GetReason(s), Reason::kCollectiveMismatch);
  Metadata md = GetMetadata(s);
  EXPECT_EQ(md["field"], "library");
  EXPECT_EQ(md["value"], "nccl");
  EXPECT_EQ(md["peer_value"], "gloo");
  EXPECT_NE(s.message().find("devices of one kind"), absl::string_view::npos) << s;
  // Only the library counts: devices of one kind with different names agree, and one rank
  // needing a new communicator is no mismatch (every rank makes one).
  CollectiveStatement other = device;
  other.device = "cuda:3";
  other.new_communicator = true;
  EXPECT_TRUE(Agree(0, "g", {device, other}).ok());
}

}  // namespace
}  // namespace tensord::distributed
