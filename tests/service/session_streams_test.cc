// A session's calls run on a stream of their own (server/core/stream_scope.h): the reference a
// call holds sets the calling thread's stream for as long as it lives, and the stream ends
// (device runtimes finish and free its queue) once the session is gone.
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "server/core/matmul_precision.h"
#include "server/core/stream_scope.h"
#include "server/service/session.h"

namespace tensord {
namespace {

struct EndedStreams {
  absl::Mutex mu;
  std::vector<uint64_t> ended;
};

EndedStreams& Ended() {
  static auto* ended = [] {
    auto* e = new EndedStreams;
    OnStreamEnd([e](uint64_t stream) {
      absl::MutexLock lock(&e->mu);
      e->ended.push_back(stream);
    });
    return e;
  }();
  return *ended;
}

bool HasEnded(uint64_t stream) {
  absl::MutexLock lock(&Ended().mu);
  for (uint64_t s : Ended().ended) {
    if (s == stream) return true;
  }
  return false;
}

TEST(SessionStreams, ACallRunsOnItsSessionsStreamUntilItsReferenceGoes) {
  SessionManager sessions(absl::Seconds(60));
  std::shared_ptr<Session> a = sessions.Create(SessionConfig{}).value();
  std::shared_ptr<Session> b = sessions.Create(SessionConfig{}).value();
  EXPECT_NE(a->stream(), kDefaultStream);
  EXPECT_NE(a->stream(), b->stream());
  EXPECT_EQ(StreamScope::Current(), kDefaultStream);
  {
    absl::StatusOr<SessionRef> found = sessions.Find(a->id());
    ASSERT_TRUE(found.ok()) << found.status();
    SessionRef ref = std::move(*found);
    EXPECT_EQ(StreamScope::Current(), a->stream());
    {
      SessionRef other = sessions.Find(b->id()).value();
      EXPECT_EQ(StreamScope::Current(), b->stream());
    }
    EXPECT_EQ(StreamScope::Current(), a->stream());
  }
  EXPECT_EQ(StreamScope::Current(), kDefaultStream);
  EXPECT_FALSE(sessions.Find("no such session").ok());
  EXPECT_EQ(StreamScope::Current(), kDefaultStream);
}

TEST(SessionStreams, ACallComputesAtItsSessionsMatmulPrecision) {
  SessionManager sessions(absl::Seconds(60));
  SessionConfig high;
  high.matmul_precision = MatmulPrecision::kHigh;
  std::shared_ptr<Session> a = sessions.Create(high).value();
  std::shared_ptr<Session> b = sessions.Create(SessionConfig{}).value();
  EXPECT_EQ(MatmulPrecisionScope::Current(), MatmulPrecision::kHighest);
  {
    SessionRef ref = sessions.Find(a->id()).value();
    EXPECT_EQ(MatmulPrecisionScope::Current(), MatmulPrecision::kHigh);
    {
      SessionRef other = sessions.Find(b->id()).value();
      EXPECT_EQ(MatmulPrecisionScope::Current(), MatmulPrecision::kHighest);
    }
    EXPECT_EQ(MatmulPrecisionScope::Current(), MatmulPrecision::kHigh);
    // Another thread computes at its own precision.
    MatmulPrecision elsewhere = MatmulPrecision::kMedium;
    std::thread([&] { elsewhere = MatmulPrecisionScope::Current(); }).join();
    EXPECT_EQ(elsewhere, MatmulPrecision::kHighest);
  }
  EXPECT_EQ(MatmulPrecisionScope::Current(), MatmulPrecision::kHighest);
}

TEST(SessionStreams, AClosedSessionsStreamEndsOnceNothingHoldsIt) {
  Ended();
  SessionManager sessions(absl::Seconds(60));
  std::shared_ptr<Session> a = sessions.Create(SessionConfig{}).value();
  const uint64_t stream = a->stream();
  ASSERT_TRUE(sessions.Close(a->id()).ok());
  EXPECT_FALSE(HasEnded(stream)) << "the test still holds the session";
  a.reset();
  EXPECT_TRUE(HasEnded(stream));
}

}  // namespace
}  // namespace tensord
