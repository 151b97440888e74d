// Idle sessions expire past their TTL: later calls get SESSION_NOT_FOUND and the session's
// memory is freed. KeepAlive (and any call) resets the idle timer.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"
#include "tests/support/heap_bytes.h"

namespace tensord::service_test {
namespace {

using ::tensord::testing::HeapBytes;

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

class TtlTest : public ServiceTest {};

TEST_F(TtlTest, KeepAliveExtendsAndIdleSessionsExpire) {
  // The host copy is made before the session exists: with a 1 s TTL, making 64 MiB on a slow
  // (sanitized) build could outlast the TTL before the upload even begins. It stays alive to
  // the end, so the heap measurements below count the server's copy only.
  constexpr int64_t kBytes = int64_t{64} << 20;
  const tc::HostTensor big = tc::HostTensor::Zeros(tc::DType::kF32, {kBytes / 4});
  const int64_t baseline = HeapBytes();
  tc::SessionOptions options;
  options.ttl_seconds = 1;
  ASSERT_OK_AND_ASSIGN(tc::Session s, client().CreateSession(options));
  EXPECT_EQ(s.ttl_seconds(), 1u);
  const std::string id = s.id();
  tc::Tensor held;
  ASSERT_OK_AND_ASSIGN(held, s.Put(big));
  EXPECT_GE(HeapBytes() - baseline, kBytes) << "the server holds the tensor";

  // Kept alive well past one TTL.
  for (int i = 0; i < 4; ++i) {
    SleepMs(450);
    ASSERT_OK_AND_ASSIGN(uint64_t ttl, s.KeepAlive());
    EXPECT_EQ(ttl, 1u);
  }
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, s.Info());
  EXPECT_EQ(info.memory_used_bytes, static_cast<uint64_t>(kBytes));

  // Left idle: collected once the TTL has passed (the reaper runs every 100 ms). Probing
  // earlier would itself count as use, so the test waits well past the TTL and probes once.
  SleepMs(2500);
  absl::Status gone = client().AttachSession(id).status();
  EXPECT_TRUE(
      FailsWith(gone, absl::StatusCode::kNotFound, v1::SESSION_NOT_FOUND, {{"session_id", id}}));
  EXPECT_TRUE(FailsWith(Status(s.Info()), absl::StatusCode::kNotFound, v1::SESSION_NOT_FOUND));
  EXPECT_TRUE(FailsWith(Status(held.ToHost()), absl::StatusCode::kNotFound, v1::SESSION_NOT_FOUND));
  EXPECT_TRUE(FailsWith(Status(s.KeepAlive()), absl::StatusCode::kNotFound, v1::SESSION_NOT_FOUND))
      << "KeepAlive cannot revive an expired session";
  EXPECT_LT(HeapBytes() - baseline, kBytes / 2) << "the expired session's storage was freed";
  // Dropping the client's handle of an expired session is harmless.
  held = tc::Tensor();
  ASSERT_OK(s.FlushReleases());
}

TEST_F(TtlTest, OtherSessionsAreUnaffected) {
  tc::SessionOptions options;
  options.ttl_seconds = 1;
  ASSERT_OK_AND_ASSIGN(tc::Session brief, client().CreateSession(options));
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, session().Put(tc::HostTensor(std::vector<float>{1, 2})));
  SleepMs(2500);
  EXPECT_TRUE(FailsWith(Status(brief.Info()), absl::StatusCode::kNotFound, v1::SESSION_NOT_FOUND));
  EXPECT_THAT(Floats(t), ::testing::ElementsAre(1, 2));
}

}  // namespace
}  // namespace tensord::service_test
