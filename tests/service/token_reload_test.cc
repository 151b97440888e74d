// The --auth-tokens file replaced while the server serves: a reload on request
// (TensordServer::ReloadCredentials, what SIGHUP runs) and by the file watch. A removed token
// fails its next call, a new one works right after the reload, a bad file keeps the tokens in
// use, and calls during reloads always see one whole table. The SIGHUP path of the tensord
// binary and the reload log lines are tested in tests/python/test_security.py.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/status.h"
#include "server/service/token_store.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::StatusCode kUnauthenticated = absl::StatusCode::kUnauthenticated;

constexpr char kTokenA[] = "reload-alice-0123456789abcdef";
constexpr char kTokenB[] = "reload-bob-fedcba9876543210";
constexpr char kTokenC[] = "reload-carol-00112233445566";

class TokenReloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/tensord_token_reload.XXXXXX";
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
    path_ = dir_ + "/tokens.txt";
  }
  void TearDown() override {
    server_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Replaces the file the way a careful operator does: a new file renamed over the old one.
  void WriteTokens(const std::string& text) {
    const std::string tmp = path_ + ".new";
    std::ofstream(tmp, std::ios::trunc) << text;
    ASSERT_EQ(std::rename(tmp.c_str(), path_.c_str()), 0);
  }

  void Start(int64_t poll_interval_ms) {
    ServerOptions options = TestServerOptions();
    options.auth_tokens_path = path_;
    options.auth_tokens_poll_interval_ms = poll_interval_ms;
    absl::StatusOr<std::unique_ptr<TensordServer>> server = TensordServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // One authenticated call (ListDevices) with `token` on a fresh channel.
  absl::Status Call(const std::string& token) {
    tc::ClientOptions options;
    options.auth_token = token;
    options.call_timeout_ms = 10000;
    absl::StatusOr<tc::Client> client =
        tc::Client::Connect(absl::StrCat("127.0.0.1:", server_->port()), options);
    if (!client.ok()) return client.status();
    return client->Devices().status();
  }

  // Polls until a call with `token` answers with `code`; false when it did not within 10 s.
  bool EventuallyAnswers(const std::string& token, absl::StatusCode code) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      if (Call(token).code() == code) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<TensordServer> server_;
};

TEST_F(TokenReloadTest, ReloadRemovesOldTokensAndAddsNewOnesAtOnce) {
  WriteTokens(absl::StrCat(kTokenA, " alice\n", kTokenB, " bob\n"));
  Start(/*poll_interval_ms=*/0);
  ASSERT_OK(Call(kTokenA));
  ASSERT_OK(Call(kTokenB));
  EXPECT_TRUE(FailsWith(Call(kTokenC), kUnauthenticated, v1::UNAUTHENTICATED));

  WriteTokens(absl::StrCat("# bob rotated\n", kTokenA, " alice\n", kTokenC, " bob\n"));
  // Without a watch nothing changes until the reload.
  EXPECT_OK(Call(kTokenB));
  ASSERT_OK(server_->ReloadCredentials());
  EXPECT_OK(Call(kTokenA));
  EXPECT_OK(Call(kTokenC));
  EXPECT_TRUE(
      FailsWith(Call(kTokenB), kUnauthenticated, v1::UNAUTHENTICATED, {{"cause", "unknown"}}));
}

TEST_F(TokenReloadTest, ABadFileKeepsTheTokensInUse) {
  WriteTokens(absl::StrCat(kTokenA, " alice\n"));
  Start(/*poll_interval_ms=*/0);
  auto reload_fails = [&](const std::string& needle) {
    absl::Status st = server_->ReloadCredentials();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << needle;
    EXPECT_THAT(std::string(st.message()), HasSubstr(needle));
    EXPECT_THAT(std::string(st.message()), Not(HasSubstr("reload-")));  // no token
    SCOPED_TRACE(needle);
    EXPECT_OK(Call(kTokenA));
    EXPECT_TRUE(FailsWith(Call(kTokenB), kUnauthenticated, v1::UNAUTHENTICATED));
  };
  // A short token, a bad tenant, a duplicate, an empty file: each keeps alice's token.
  WriteTokens(absl::StrCat(kTokenB, " bob\nshort carol\n"));
  reload_fails("line 2");
  WriteTokens(absl::StrCat(kTokenB, " b/ob\n"));
  reload_fails("line 1");
  WriteTokens(absl::StrCat(kTokenB, " bob\n", kTokenB, " bob\n"));
  reload_fails("line 2");
  WriteTokens("# everyone removed\n");
  reload_fails("holds no token");
  // A missing file, and a directory where the file was.
  ASSERT_EQ(std::remove(path_.c_str()), 0);
  reload_fails(path_);
  std::filesystem::create_directory(path_);
  reload_fails(path_);
  std::filesystem::remove(path_);
  // A good file again is taken.
  WriteTokens(absl::StrCat(kTokenB, " bob\n"));
  ASSERT_OK(server_->ReloadCredentials());
  EXPECT_OK(Call(kTokenB));
  EXPECT_TRUE(FailsWith(Call(kTokenA), kUnauthenticated, v1::UNAUTHENTICATED));
}

TEST_F(TokenReloadTest, TheWatchReloadsAChangedFile) {
  WriteTokens(absl::StrCat(kTokenA, " alice\n"));
  Start(/*poll_interval_ms=*/20);
  ASSERT_OK(Call(kTokenA));
  // Renamed over the old file (a new inode).
  WriteTokens(absl::StrCat(kTokenB, " bob\n"));
  EXPECT_TRUE(EventuallyAnswers(kTokenB, absl::StatusCode::kOk));
  EXPECT_TRUE(FailsWith(Call(kTokenA), kUnauthenticated, v1::UNAUTHENTICATED));
  // Rewritten in place (same inode, another size).
  std::ofstream(path_, std::ios::trunc) << kTokenC << " carol\n# rewritten in place\n";
  EXPECT_TRUE(EventuallyAnswers(kTokenC, absl::StatusCode::kOk));
  EXPECT_TRUE(FailsWith(Call(kTokenB), kUnauthenticated, v1::UNAUTHENTICATED));
  // A bad version in between (seen or not by the watch) does not stop the next good one.
  std::ofstream(path_, std::ios::trunc) << "short carol\n";
  WriteTokens(absl::StrCat("# bad, then good\n", kTokenA, " alice\n"));
  EXPECT_TRUE(EventuallyAnswers(kTokenA, absl::StatusCode::kOk));
}

TEST_F(TokenReloadTest, CallsDuringReloadsSeeOneWholeTable) {
  // alice's token is in every version of the file; bob's and carol's alternate.
  const std::string with_bob = absl::StrCat(kTokenA, " alice\n", kTokenB, " bob\n");
  const std::string with_carol = absl::StrCat(kTokenC, " carol\n", kTokenA, " alice\n");
  WriteTokens(with_bob);
  Start(/*poll_interval_ms=*/1);
  std::atomic<bool> done{false};
  std::atomic<int> failures{0}, calls{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      tc::ClientOptions options;
      options.auth_token = kTokenA;
      options.call_timeout_ms = 10000;
      absl::StatusOr<tc::Client> client =
          tc::Client::Connect(absl::StrCat("127.0.0.1:", server_->port()), options);
      if (!client.ok()) {
        ++failures;
        return;
      }
      while (!done.load()) {
        if (!client->Devices().ok()) ++failures;
        ++calls;
      }
    });
  }
  // Both reload paths at once: explicit reloads here and the 1 ms watch.
  for (int i = 0; i < 100; ++i) {
    WriteTokens(i % 2 == 0 ? with_carol : with_bob);
    EXPECT_OK(server_->ReloadCredentials());
  }
  done = true;
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0) << "of " << calls.load() << " calls";
  EXPECT_GT(calls.load(), 0);
  EXPECT_OK(Call(kTokenB));  // the last version written holds bob
}

TEST_F(TokenReloadTest, ServerWithoutTokensHasNothingToReload) {
  absl::StatusOr<std::unique_ptr<TensordServer>> server = TensordServer::Start(TestServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_OK((*server)->ReloadCredentials());
}

TEST_F(TokenReloadTest, BadPollIntervalFailsStart) {
  WriteTokens(absl::StrCat(kTokenA, " alice\n"));
  ServerOptions options = TestServerOptions();
  options.auth_tokens_path = path_;
  options.auth_tokens_poll_interval_ms = -1;
  absl::StatusOr<std::unique_ptr<TensordServer>> server = TensordServer::Start(options);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("poll interval"));
}

TEST(TokenStoreTest, CurrentIsTheLastGoodTable) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/token_store_test_" + std::to_string(getpid()) + ".txt";
  std::ofstream(path, std::ios::trunc) << kTokenA << " alice\n";
  absl::StatusOr<std::unique_ptr<TokenStore>> store = TokenStore::Open(path, absl::ZeroDuration());
  ASSERT_TRUE(store.ok()) << store.status();
  std::shared_ptr<const TokenTable> first = (*store)->Current();
  EXPECT_EQ(first->Lookup(kTokenA), "alice");
  std::ofstream(path, std::ios::trunc) << kTokenB << " bob\n";
  ASSERT_OK((*store)->Reload());
  // A call that read the table before the reload keeps a whole, unchanged copy.
  EXPECT_EQ(first->Lookup(kTokenA), "alice");
  EXPECT_EQ((*store)->Current()->Lookup(kTokenB), "bob");
  EXPECT_EQ((*store)->Current()->Lookup(kTokenA), "");
  std::remove(path.c_str());
  EXPECT_FALSE((*store)->Reload().ok());
  EXPECT_EQ((*store)->Current()->Lookup(kTokenB), "bob");
  EXPECT_FALSE(TokenStore::Open(path, absl::ZeroDuration()).ok()) << "a missing file at start";
}

TEST(TokenStoreTest, EveryThreadReadsTheTableAfterAReload) {
  const std::string dir = ::testing::TempDir();
  const std::string base = dir + "/token_store_threads_" + std::to_string(getpid());
  std::ofstream(base + "_a.txt", std::ios::trunc) << kTokenA << " alice\n";
  std::ofstream(base + "_b.txt", std::ios::trunc) << kTokenB << " bob\n";
  absl::StatusOr<std::unique_ptr<TokenStore>> a =
      TokenStore::Open(base + "_a.txt", absl::ZeroDuration());
  absl::StatusOr<std::unique_ptr<TokenStore>> b =
      TokenStore::Open(base + "_b.txt", absl::ZeroDuration());
  ASSERT_TRUE(a.ok() && b.ok());
  // One thread alternates between two stores: each read is of the store asked.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*a)->Current()->Lookup(kTokenA), "alice");
    EXPECT_EQ((*b)->Current()->Lookup(kTokenB), "bob");
    EXPECT_EQ((*b)->Current()->Lookup(kTokenA), "");
  }
  // Threads that read the table before a reload made elsewhere read the new one next.
  constexpr int kThreads = 4;
  std::atomic<int> read{0};
  std::atomic<bool> reloaded{false};
  std::vector<std::string> after(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      EXPECT_EQ((*a)->Current()->Lookup(kTokenA), "alice");
      ++read;
      while (!reloaded.load()) std::this_thread::yield();
      after[t] = (*a)->Current()->Lookup(kTokenB);
    });
  }
  while (read.load() < kThreads) std::this_thread::yield();
  std::ofstream(base + "_a.txt", std::ios::trunc) << kTokenB << " carol\n";
  ASSERT_OK((*a)->Reload());
  reloaded = true;
  for (std::thread& t : threads) t.join();
  for (const std::string& tenant : after) EXPECT_EQ(tenant, "carol");
  EXPECT_EQ((*a)->Current()->Lookup(kTokenA), "");
  EXPECT_EQ((*b)->Current()->Lookup(kTokenB), "bob") << "the other store is unchanged";
  std::remove((base + "_a.txt").c_str());
  std::remove((base + "_b.txt").c_str());
}

}  // namespace
}  // namespace tensord::service_test
