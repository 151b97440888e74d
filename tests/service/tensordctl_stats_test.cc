// tensordctl stats run against servers with /metrics, without it, and against endpoints that
// serve something else.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/cpp/tensordctl_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"
#include "tests/service/tensordctl_run.h"

namespace tensord::service_test {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

// A server of its own with /metrics, so that its sessions and counters are this test's alone.
class StatsCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options = TestServerOptions();
    options.metrics_address = "127.0.0.1:0";
    env_ = StartServer(options);
    ASSERT_NE(env_, nullptr);
    ASSERT_GT(env_->server->metrics_port(), 0);
  }
  std::string Metrics() const { return absl::StrCat("127.0.0.1:", env_->server->metrics_port()); }
  tc::Client& client() { return *env_->client; }

  std::unique_ptr<ServerAndClient> env_;
};

TEST_F(StatsCommandTest, AKnownWorkload) {
  ASSERT_OK_AND_ASSIGN(tc::Session a, client().CreateSession());
  ASSERT_OK_AND_ASSIGN(tc::Session b, client().CreateSession());
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, a.Put(tc::HostTensor(std::vector<float>(64, 1.5f))));
  std::vector<tc::Tensor> sums;  // kept, so that the memory stays as it is while stats runs
  for (int i = 0; i < 7; ++i) {
    ASSERT_OK_AND_ASSIGN(tc::Tensor y, tc::Add(x, x));
    sums.push_back(std::move(y));
  }
  ASSERT_OK_AND_ASSIGN(tc::Tensor m, b.Put(tc::HostTensor(std::vector<double>(100, 2.0))));
  // One refusal of a known reason: a handle the session does not hold.
  EXPECT_FALSE(b.Get(uint64_t{987654}).ok());
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info_a, a.Info());
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info_b, b.Info());
  const uint64_t bytes = info_a.memory_used_bytes + info_b.memory_used_bytes;
  ASSERT_EQ(bytes, 8 * 64 * 4 + 100 * 8);

  CtlResult r = RunCtl(absl::StrCat("stats --metrics ", Metrics(), " --interval 0.2"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out,
              ContainsRegex(absl::StrCat("^tensord [0-9.]+ at http://", Metrics(),
                                         "/metrics, up [0-9.ms ]+, rates over 0\\.[0-9]+ s\n")));
  EXPECT_THAT(r.out, ContainsRegex("\nsessions +2\n  anonymous +2\n"));
  const std::string memory = tensordctl::HumanBytes(static_cast<double>(bytes));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(" ", memory, "\nmemory by tenant\n")));
  EXPECT_THAT(
      r.out, ContainsRegex(absl::StrCat("\n  anonymous +", memory, "\nserver RSS +[0-9.]+ MiB\n")));
  // Nothing ran between the two scrapes: the totals, at rate 0.
  EXPECT_THAT(r.out, ContainsRegex("\nop +calls/s +total\n  add +0\\.0 +7\n"));
  EXPECT_THAT(r.out, ContainsRegex("\n  errors +0\\.0 +1\n  TENSOR_NOT_FOUND +0\\.0 +1\n"));

  // Calls while stats waits between its scrapes show as a rate. The address may come from the
  // environment.
  std::atomic<bool> done{false};
  std::atomic<int> calls{0};
  std::thread load([&] {
    while (!done) {
      if (tc::Mul(m, 3.0).ok()) ++calls;
    }
  });
  CtlResult busy =
      RunCtl("stats --interval 0.5", absl::StrCat("TENSORD_METRICS_ADDRESS=", Metrics()));
  done = true;
  load.join();
  ASSERT_EQ(busy.exit_code, 0) << busy.err;
  ASSERT_GT(calls.load(), 0);
  std::string mul_line;
  for (absl::string_view line : absl::StrSplit(busy.out, '\n')) {
    if (absl::StartsWith(line, "  mul ")) mul_line = std::string(line);
  }
  std::vector<std::string> fields = absl::StrSplit(mul_line, ' ', absl::SkipEmpty());
  double rate = 0, total = 0;
  ASSERT_EQ(fields.size(), 3u) << busy.out;
  ASSERT_TRUE(absl::SimpleAtod(fields[1], &rate) && absl::SimpleAtod(fields[2], &total));
  EXPECT_GT(rate, 0) << busy.out;
  EXPECT_LE(total, calls.load());
  EXPECT_LE(rate * 0.4, total) << "a rate over about half a second";
}

TEST_F(StatsCommandTest, WatchRepeatsUntilInterrupted) {
  // Not a terminal: the reports follow one another.
  CtlResult r = RunCtl(absl::StrCat("stats --metrics ", Metrics(), " --interval 0.2 --watch"),
                       "timeout -s INT 1.5");
  EXPECT_NE(r.exit_code, 0) << "interrupted";
  std::vector<std::string> reports = absl::StrSplit(r.out, "\ntensord ");
  EXPECT_GE(reports.size(), 2u) << r.out;
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos) << "no screen control off a terminal";
}

TEST(StatsCommandErrorsTest, NoEndpointOrNotTensord) {
  // A closed port.
  std::unique_ptr<ServerAndClient> gone = [] {
    ServerOptions options = TestServerOptions();
    options.metrics_address = "127.0.0.1:0";
    return StartServer(options);
  }();
  ASSERT_NE(gone, nullptr);
  const int closed_port = gone->server->metrics_port();
  const int grpc_port = gone->server->port();
  gone.reset();
  CtlResult closed = RunCtl(absl::StrCat("stats --metrics 127.0.0.1:", closed_port));
  EXPECT_EQ(closed.exit_code, 1);
  EXPECT_THAT(closed.err, HasSubstr(absl::StrCat("cannot scrape http://127.0.0.1:", closed_port,
                                                 "/metrics: cannot connect")));
  EXPECT_EQ(closed.out, "");

  // A gRPC port speaks HTTP/2 only.
  CtlResult grpc = RunCtl(absl::StrCat("--timeout 5 stats --metrics 127.0.0.1:", grpc_port));
  EXPECT_EQ(grpc.exit_code, 1);
  EXPECT_THAT(grpc.err, HasSubstr("cannot scrape"));
}

// An HTTP server whose /metrics answers whatever the test sets.
class FakeMetricsServer {
 public:
  FakeMetricsServer() {
    http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      int status;
      std::string page;
      std::chrono::milliseconds delay;
      {
        std::lock_guard<std::mutex> lock(mu_);
        status = status_;
        page = page_;
        delay = delay_;
      }
      std::this_thread::sleep_for(delay);
      res.status = status;
      res.set_content(page, "text/plain");
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (port_ > 0 && !http_.is_running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~FakeMetricsServer() {
    http_.stop();
    thread_.join();
  }
  void Serve(int status, std::string page, std::chrono::milliseconds delay = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    page_ = std::move(page);
    delay_ = delay;
  }
  int port() const { return port_; }

 private:
  httplib::Server http_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  int status_ = 200;
  std::string page_;
  std::chrono::milliseconds delay_{0};
};

TEST(StatsCommandErrorsTest, EndpointsThatAreNotTensords) {
  FakeMetricsServer fake;
  ASSERT_GT(fake.port(), 0);
  const std::string stats =
      absl::StrCat("--timeout 1 stats --interval 0.1 --metrics 127.0.0.1:", fake.port());
  const std::string url = absl::StrCat("http://127.0.0.1:", fake.port(), "/metrics");
  const std::vector<std::pair<std::pair<int, std::string>, std::string>> cases = {
      {{200, "<html><body>hello</body></html>\n"},
       " does not serve Prometheus metrics (line 1: no metric name"},
      {{200, "# TYPE other_total counter\nother_total 3\n"},
       " serves metrics, but not tensord's (no tensord_build_info)"},
      {{404, "not here\n"}, " answered HTTP 404, not tensord's metrics"},
  };
  for (const auto& [served, error] : cases) {
    fake.Serve(served.first, served.second);
    CtlResult r = RunCtl(stats);
    EXPECT_EQ(r.exit_code, 1) << served.second;
    EXPECT_THAT(r.err, HasSubstr(url + error));
    EXPECT_EQ(r.out, "");
  }
  // A server slower than --timeout: the command gives up instead of hanging.
  fake.Serve(200, "tensord_build_info{version=\"1\"} 1\n", std::chrono::milliseconds(1500));
  CtlResult slow = RunCtl(absl::StrCat("--timeout 0.3 stats --metrics 127.0.0.1:", fake.port()));
  EXPECT_EQ(slow.exit_code, 1);
  EXPECT_THAT(slow.err, HasSubstr(absl::StrCat("cannot scrape ", url, ": no HTTP answer")));
  // The smallest page tensord could serve is enough.
  fake.Serve(200, "tensord_build_info{version=\"1\"} 1\n");
  CtlResult minimal = RunCtl(stats);
  EXPECT_EQ(minimal.exit_code, 0) << minimal.err;
  EXPECT_THAT(minimal.out, HasSubstr("(no op calls yet)"));
  // Usage mistakes.
  EXPECT_EQ(RunCtl("stats").exit_code, 2) << "no address";
  EXPECT_EQ(RunCtl("stats --metrics 127.0.0.1").exit_code, 2) << "no port";
  EXPECT_EQ(RunCtl("stats --metrics 127.0.0.1:1 --interval -1").exit_code, 2);
  EXPECT_EQ(RunCtl("stats --metrics 127.0.0.1:1 --interval soon").exit_code, 2);
}

}  // namespace
}  // namespace tensord::service_test
