// The SessionManager's table: sessions live in shards by id, each under its own lock, with the
// tenants' counts and the reaper under the manager's. Calls of many sessions from many threads
// at once must leave the table, the counts and the reaper's view exactly as one thread would.
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/core/status.h"
#include "server/service/session.h"

namespace tensord {
namespace {

SessionConfig Tenant(const std::string& tenant, absl::Duration ttl = absl::Minutes(10)) {
  SessionConfig config;
  config.tenant = tenant;
  config.ttl = ttl;
  return config;
}

TEST(SessionManager, ManyThreadsCreateFindAndCloseWithoutLosingASession) {
  SessionManager manager(absl::Hours(1));  // no reaping during the test
  constexpr int kThreads = 8, kPerThread = 40;
  std::vector<std::vector<std::string>> kept(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto session = manager.Create(Tenant("tenant" + std::to_string(t % 2)));
        ASSERT_TRUE(session.ok()) << session.status();
        const std::string id = (*session)->id();
        for (int call = 0; call < 3; ++call) {
          auto ref = manager.Find(id);
          ASSERT_TRUE(ref.ok()) << ref.status();
          EXPECT_EQ((*ref)->id(), id);
        }
        if (i % 2 == 0) {
          ASSERT_TRUE(manager.Close(id).ok());
        } else {
          kept[t].push_back(id);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(manager.size(), size_t{kThreads * kPerThread / 2});
  EXPECT_EQ(manager.Usage().size(), manager.size());
  EXPECT_EQ(manager.TenantSessions("tenant0") + manager.TenantSessions("tenant1"),
            int64_t{kThreads * kPerThread / 2});
  for (const auto& ids : kept) {
    for (const std::string& id : ids) EXPECT_TRUE(manager.Find(id).ok()) << id;
  }
  auto closed = manager.Create(Tenant("tenant0"));
  ASSERT_TRUE(closed.ok());
  const std::string id = (*closed)->id();
  ASSERT_TRUE(manager.Close(id).ok());
  EXPECT_EQ(GetReason(manager.Find(id).status()), Reason::kSessionNotFound);
  EXPECT_EQ(GetReason(manager.Close(id)), Reason::kSessionNotFound);
}

TEST(SessionManager, TheReaperCollectsIdleSessionsOfEveryShardButNotOneInACall) {
  SessionManager manager(absl::Hours(1));
  std::vector<std::string> ids;
  for (int i = 0; i < 64; ++i) {  // 64 random ids reach most of the 16 shards
    auto session = manager.Create(Tenant("t", absl::Seconds(1)));
    ASSERT_TRUE(session.ok());
    ids.push_back((*session)->id());
  }
  {
    auto in_call = manager.Find(ids[5]);
    ASSERT_TRUE(in_call.ok());
    EXPECT_EQ(manager.Reap(absl::Now() + absl::Seconds(5)), 63);
    EXPECT_EQ(manager.size(), size_t{1});
    EXPECT_EQ(manager.TenantSessions("t"), 1);
  }
  // The call's end counts as its last use: idle again only a TTL after it.
  EXPECT_EQ(manager.Reap(absl::Now()), 0);
  EXPECT_EQ(manager.Reap(absl::Now() + absl::Seconds(5)), 1);
  EXPECT_EQ(manager.size(), size_t{0});
  EXPECT_EQ(manager.TenantSessions("t"), 0);
}

TEST(SessionManager, ATenantsLimitCountsItsSessionsInEveryShard) {
  SessionManager manager(absl::Hours(1), /*max_sessions_per_tenant=*/5);
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    auto session = manager.Create(Tenant("a"));
    ASSERT_TRUE(session.ok());
    ids.push_back((*session)->id());
  }
  EXPECT_EQ(GetReason(manager.Create(Tenant("a")).status()), Reason::kLimitExceeded);
  EXPECT_TRUE(manager.Create(Tenant("b")).ok());  // another tenant's count
  ASSERT_TRUE(manager.Close(ids[0]).ok());
  EXPECT_TRUE(manager.Create(Tenant("a")).ok());
  // Another tenant's id answers as an unknown one, whichever shard holds it.
  EXPECT_EQ(GetReason(manager.CheckTenant("b", ids[1])), Reason::kSessionNotFound);
  EXPECT_TRUE(manager.CheckTenant("a", ids[1]).ok());
}

}  // namespace
}  // namespace tensord
