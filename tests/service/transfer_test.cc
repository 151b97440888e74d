// Streamed transfers: tensors of 64 MiB and more (beyond one gRPC message) go up and come back
// byte for byte; inline fetches are bounded.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

class TransferTest : public ServiceTest {};

// Bytes that differ at every position, so a lost, repeated or reordered chunk shows.
tc::HostTensor Pattern(int64_t elements) {
  std::vector<int32_t> v(static_cast<size_t>(elements));
  uint32_t x = 2463534242u;
  for (int32_t& e : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    e = static_cast<int32_t>(x);
  }
  return tc::HostTensor(v, {elements});
}

TEST_F(TransferTest, SixtyFourMebibytesRoundTrip) {
  // 64 MiB plus one element: more than the server's message limit and not a multiple of the
  // chunk size.
  const int64_t elements = (int64_t{64} << 20) / 4 + 1;
  const tc::HostTensor value = Pattern(elements);
  ASSERT_EQ(value.nbytes(), (size_t{64} << 20) + 4);
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, session().Put(value));
  EXPECT_EQ(t.nbytes(), value.nbytes());
  EXPECT_EQ(t.shape(), tc::Shape{elements});
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, session().Info());
  EXPECT_EQ(info.memory_used_bytes, value.nbytes());
  ASSERT_OK_AND_ASSIGN(tc::HostTensor back, t.ToHost());
  EXPECT_EQ(back.dtype(), value.dtype());
  EXPECT_EQ(back.shape(), value.shape());
  EXPECT_TRUE(back.bytes() == value.bytes()) << "bytes differ";
  // Other chunk sizes both ways.
  tc::PutOptions big_chunks;
  big_chunks.chunk_bytes = size_t{8} << 20;
  ASSERT_OK_AND_ASSIGN(tc::Tensor t2, session().Put(value, big_chunks));
  ASSERT_OK_AND_ASSIGN(tc::HostTensor back2, session().Get(t2, 3 << 20));
  EXPECT_TRUE(back2.bytes() == value.bytes()) << "bytes differ";
  // The server computes on what arrived: sum of the i64 cast of the first 1000 elements.
  ASSERT_OK_AND_ASSIGN(tc::Tensor head,
                       session().Op1("narrow", {t}, {{"dim", 0}, {"start", 0}, {"length", 1000}}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor total, tc::Sum(tc::ToDtype(head, tc::DType::kI64)));
  int64_t expected = 0;
  for (int i = 0; i < 1000; ++i) expected += value.data<int32_t>()[i];
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> got, total.ToVector<int64_t>());
  EXPECT_EQ(got.at(0), expected);
}

// Progress callbacks see every chunk: done grows to the total, once per chunk.
TEST_F(TransferTest, ProgressIsReportedPerChunk) {
  const tc::HostTensor value = Pattern((int64_t{5} << 20) / 4 + 3);  // 5 MiB + 12 bytes
  const uint64_t total = value.nbytes();
  std::vector<std::pair<uint64_t, uint64_t>> put_calls;
  tc::PutOptions put;
  put.chunk_bytes = size_t{1} << 20;
  put.progress = [&](uint64_t done, uint64_t of) { put_calls.emplace_back(done, of); };
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, session().Put(value, put));
  ASSERT_EQ(put_calls.size(), 6u);
  for (size_t i = 0; i < put_calls.size(); ++i) {
    EXPECT_EQ(put_calls[i].first, std::min<uint64_t>((i + 1) << 20, total)) << i;
    EXPECT_EQ(put_calls[i].second, total);
  }
  std::vector<std::pair<uint64_t, uint64_t>> get_calls;
  tc::GetOptions get;
  get.chunk_bytes = 2 << 20;
  get.progress = [&](uint64_t done, uint64_t of) { get_calls.emplace_back(done, of); };
  ASSERT_OK_AND_ASSIGN(tc::HostTensor back, session().Get(t, get));
  EXPECT_TRUE(back.bytes() == value.bytes()) << "bytes differ";
  ASSERT_EQ(get_calls.size(), 3u);
  EXPECT_EQ(get_calls[0], std::make_pair(uint64_t{2} << 20, total));
  EXPECT_EQ(get_calls[1], std::make_pair(uint64_t{4} << 20, total));
  EXPECT_EQ(get_calls[2], std::make_pair(total, total));
  // Without a callback, or through the older overload, the same bytes come back.
  ASSERT_OK_AND_ASSIGN(tc::HostTensor plain, session().Get(t.handle(), 2 << 20));
  EXPECT_TRUE(plain.bytes() == value.bytes()) << "bytes differ";
}

TEST_F(TransferTest, LargeFetchIsRefusedNotTruncated) {
  // 64 MiB do not fit a response message; inline fetches are for small results.
  ASSERT_OK_AND_ASSIGN(tc::Tensor big, session().Op1("zeros", {}, {{"shape", {16 << 20}}}));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, session().Info());
  tc::Batch batch = session().NewBatch();
  batch.Add("add", {big, 1.0}, {}, {false, /*fetch=*/true});
  EXPECT_TRUE(FailsWith(Status(batch.Run()), absl::StatusCode::kResourceExhausted,
                        v1::LIMIT_EXCEEDED, {{"call_index", "0"}, {"limit", "fetch_bytes"}}));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, session().Info());
  EXPECT_EQ(after, before);
}

TEST_F(TransferTest, EmptyAndScalarTensors) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor empty,
                       session().Put(tc::HostTensor::Zeros(tc::DType::kF64, {3, 0, 2})));
  EXPECT_EQ(empty.nbytes(), 0u);
  ASSERT_OK_AND_ASSIGN(tc::HostTensor e, empty.ToHost());
  EXPECT_EQ(e.shape(), (tc::Shape{3, 0, 2}));
  EXPECT_TRUE(e.bytes().empty());
  ASSERT_OK_AND_ASSIGN(tc::Tensor scalar, session().Put(tc::HostTensor::Scalar(true)));
  ASSERT_OK_AND_ASSIGN(tc::HostTensor s, scalar.ToHost());
  EXPECT_EQ(s, tc::HostTensor::Scalar(true));
}

}  // namespace
}  // namespace tensord::service_test
