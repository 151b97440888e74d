// What an operator sees of a running server: the /metrics endpoint after a known workload, the
// log line of each RPC, and the request id that ties a client's error to that line.
#include <httplib.h>

#include <cstdio>
#include <limits>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/core/status.h"
#include "server/service/grpc_status.h"
#include "server/service/metrics_registry.h"
#include "server/service/rpc_call.h"
#include "server/service/server_log.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

TEST(MetricsRegistryTest, RendersTheTextFormat) {
  metrics::Registry r;
  metrics::CounterFamily& calls = r.Counter("x_calls_total", "Calls.\nBy \\kind.", {"kind"});
  calls.Add({"a\"b\\c\nd"}, 2);
  calls.Add({"plain"});
  metrics::HistogramFamily& h = r.Histogram("x_seconds", "Time.", {}, {0.1, 1});
  h.Observe({}, 0.05);
  h.Observe({}, 0.5);
  h.Observe({}, 7);
  r.Gauge("x_open", "Open.", {"tenant"}, [] {
    return std::vector<metrics::GaugeSample>{{{"t1"}, 3}, {{"t2"}, 0.25}};
  });
  EXPECT_EQ(r.Render(),
            "# HELP x_calls_total Calls.\\nBy \\\\kind.\n"
            "# TYPE x_calls_total counter\n"
            "x_calls_total{kind=\"a\\\"b\\\\c\\nd\"} 2\n"
            "x_calls_total{kind=\"plain\"} 1\n"
            "# HELP x_seconds Time.\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"0.1\"} 1\n"
            "x_seconds_bucket{le=\"1\"} 2\n"
            "x_seconds_bucket{le=\"+Inf\"} 3\n"
            "x_seconds_sum 7.55\n"
            "x_seconds_count 3\n"
            "# HELP x_open Open.\n"
            "# TYPE x_open gauge\n"
            "x_open{tenant=\"t1\"} 3\n"
            "x_open{tenant=\"t2\"} 0.25\n");
}

TEST(ServerLogTest, JsonLinesEscapeWhatARequestCarries) {
  const std::string line =
      ServerLog::Render(LogFormat::kJson, "2026-12-02T00:00:00.000Z", LogLevel::kWarning, "rpc",
                        {{"method", "Execute"},
                         {"session", std::string("a\"b\\c\n\x01\xff\xc3\xa9", 10)},
                         {"ops", int64_t{3}},
                         {"duration_ms", 1.5},
                         {"empty", ""},
                         {"ok", false}});
  EXPECT_EQ(line,
            "{\"ts\":\"2026-12-02T00:00:00.000Z\",\"level\":\"warning\",\"event\":\"rpc\","
            "\"method\":\"Execute\",\"session\":\"a\\\"b\\\\c\\n\\u0001\\ufffd\xc3\xa9\","
            "\"ops\":3,\"duration_ms\":1.5,\"ok\":false}\n");
  EXPECT_EQ(ServerLog::Render(LogFormat::kText, "T", LogLevel::kInfo, "rpc",
                              {{"method", "Execute"}, {"error", "two words"}, {"n", 2}}),
            "T info rpc method=Execute error=\"two words\" n=2\n");
}

// Numbers print as printf's "%.6g" would, and JSON's null stands for what is not finite.
TEST(ServerLogTest, NumbersPrintWithSixSignificantDigits) {
  for (double v : {0.0, 1.5, 0.0123456789, 1e-7, 123456789.0, -2.5e12, 1234.5678, 100.0}) {
    EXPECT_EQ(ServerLog::Render(LogFormat::kText, "T", LogLevel::kInfo, "e", {{"v", v}}),
              absl::StrCat("T info e v=", absl::StrFormat("%.6g", v), "\n"))
        << v;
  }
  EXPECT_EQ(ServerLog::Render(LogFormat::kJson, "T", LogLevel::kInfo, "e",
                              {{"v", std::numeric_limits<double>::infinity()}}),
            "{\"ts\":\"T\",\"level\":\"info\",\"event\":\"e\",\"v\":null}\n");
}

TEST(ServerLogTest, LevelsFilter) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  ServerLog log(LogLevel::kWarning, LogFormat::kText, out);
  log.Write(LogLevel::kInfo, "hidden", {});
  log.Write(LogLevel::kError, "shown", {});
  log.Configure(LogLevel::kOff, LogFormat::kText);
  log.Write(LogLevel::kError, "off", {});
  std::rewind(out);
  char buf[256] = {};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, out);
  std::fclose(out);
  const std::string text(buf, n);
  EXPECT_EQ(text.find("hidden"), std::string::npos);
  EXPECT_NE(text.find("error shown"), std::string::npos);
  EXPECT_EQ(text.find("off"), std::string::npos);
  EXPECT_FALSE(ParseLogLevel("loud").ok());
  EXPECT_FALSE(ParseLogFormat("xml").ok());
}

// A line's time stamp is the time it was written, in UTC to the millisecond, also across the
// seconds a thread's lines pass through (the date and time to the second are kept per second).
TEST(ServerLogTest, TimeStampsFollowTheClockToTheMillisecond) {
  constexpr const char* kFormat = "%Y-%m-%dT%H:%M:%E3SZ";
  const absl::Time end = absl::Now() + absl::Milliseconds(1300);
  int lines = 0;
  std::set<std::string> seconds;
  while (absl::Now() < end) {
    std::FILE* out = std::tmpfile();
    ASSERT_NE(out, nullptr);
    ServerLog log(LogLevel::kInfo, LogFormat::kJson, out);
    const std::string before = absl::FormatTime(kFormat, absl::Now(), absl::UTCTimeZone());
    log.Write(LogLevel::kInfo, "tick", {});
    const std::string after = absl::FormatTime(kFormat, absl::Now(), absl::UTCTimeZone());
    std::rewind(out);
    char buf[128] = {};
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, out);
    std::fclose(out);
    std::smatch m;
    const std::string line(buf, n);
    ASSERT_TRUE(std::regex_search(line, m, std::regex("\"ts\":\"([^\"]*)\""))) << line;
    const std::string ts = m[1];
    ASSERT_TRUE(std::regex_match(ts, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
        << ts;
    EXPECT_LE(before, ts);  // fixed width: the text's order is the time's
    EXPECT_LE(ts, after);
    seconds.insert(ts.substr(0, 19));
    ++lines;
    absl::SleepFor(absl::Milliseconds(7));
  }
  EXPECT_GE(seconds.size(), 2u) << lines << " lines";
}

TEST(RequestIdTest, WhatIsKeptAndWhatIsReplaced) {
  EXPECT_TRUE(UsableRequestId("7f3c-req.42:a/b+c=d@e_f"));
  EXPECT_FALSE(UsableRequestId(""));
  EXPECT_FALSE(UsableRequestId("has space"));
  EXPECT_FALSE(UsableRequestId(std::string(kMaxRequestIdBytes + 1, 'a')));
  EXPECT_TRUE(UsableRequestId(std::string(kMaxRequestIdBytes, 'a')));
  const std::string id = NewRequestId();
  EXPECT_TRUE(std::regex_match(id, std::regex("[0-9a-f]{32}"))) << id;
  EXPECT_NE(id, NewRequestId());
  EXPECT_TRUE(ValidTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
  EXPECT_FALSE(ValidTraceparent("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"));
  EXPECT_FALSE(ValidTraceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01"));
  EXPECT_FALSE(ValidTraceparent("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
  EXPECT_FALSE(ValidTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-01"));
}

TEST(SentReasonTest, TheLogAndMetricsNameTheReasonTheClientGets) {
  EXPECT_EQ(SentReasonName(absl::OkStatus()), "");
  EXPECT_EQ(SentReasonName(Error(Reason::kTensorNotFound, "gone")), "TENSOR_NOT_FOUND");
  // A library's own status has no tensord reason; the client gets the closest to its code.
  EXPECT_EQ(SentReasonName(absl::CancelledError("client went away")), "CANCELLED");
  EXPECT_EQ(SentReasonName(absl::InternalError("boom")), "INTERNAL");
}

// A server with /metrics on a free port, its log lines captured in a file.
class ObservedServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_file_ = std::tmpfile();
    ASSERT_NE(log_file_, nullptr);
    DefaultLog().set_output(log_file_);
    DefaultLog().Configure(LogLevel::kInfo, LogFormat::kJson);
    ServerOptions options = TestServerOptions();
    options.metrics_address = "127.0.0.1:0";
    env_ = StartServer(options);
    ASSERT_NE(env_, nullptr);
    ASSERT_GT(env_->server->metrics_port(), 0);
    stub_ = v1::Tensord::NewStub(env_->client->channel());
  }
  void TearDown() override {
    env_.reset();
    DefaultLog().set_output(nullptr);
    if (log_file_ != nullptr) std::fclose(log_file_);
  }

  std::string Scrape() {
    httplib::Client http("127.0.0.1", env_->server->metrics_port());
    httplib::Result res = http.Get("/metrics");
    EXPECT_TRUE(res) << "no answer from /metrics";
    if (!res) return "";
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    return res->body;
  }

  // The value of the series named exactly `series` (name and labels as rendered), or -1.
  static double Sample(const std::string& text, const std::string& series) {
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (!absl::ConsumePrefix(&line, series) || !absl::ConsumePrefix(&line, " ")) continue;
      double v = 0;
      return absl::SimpleAtod(line, &v) ? v : -1;
    }
    return -1;
  }

  std::vector<std::string> LogLines() {
    std::fflush(log_file_);
    std::rewind(log_file_);
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), log_file_)) > 0) text.append(buf, n);
    std::fseek(log_file_, 0, SEEK_END);
    return absl::StrSplit(text, '\n', absl::SkipEmpty());
  }

  std::unique_ptr<ServerAndClient> env_;
  std::unique_ptr<v1::Tensord::Stub> stub_;
  std::FILE* log_file_ = nullptr;
};

TEST_F(ObservedServerTest, AKnownWorkloadShowsInTheMetrics) {
  absl::StatusOr<tc::Session> s = env_->client->CreateSession();
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<tc::Tensor> x =
      s->Put(tc::HostTensor(std::vector<float>{1, 2, 3, 4}, tc::Shape{4}));
  ASSERT_TRUE(x.ok()) << x.status();
  std::vector<tc::Tensor> sums;  // kept, so no release runs before the scrape
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<tc::Tensor> y = tc::Add(*x, *x);
    ASSERT_TRUE(y.ok()) << y.status();
    sums.push_back(*std::move(y));
  }
  // One refusal of a known reason: a handle the session does not hold.
  v1::ReleaseRequest release;
  release.set_session_id(s->id());
  release.add_handles(987654);
  v1::ReleaseResponse released;
  grpc::ClientContext ctx;
  EXPECT_EQ(stub_->Release(&ctx, release, &released).error_code(), grpc::StatusCode::NOT_FOUND);
  // Asking about a session creates none.
  ASSERT_TRUE(s->Info().ok());

  const std::string text = Scrape();
  EXPECT_EQ(Sample(text, "tensord_rpcs_total{method=\"Execute\",code=\"OK\"}"), 3) << text;
  EXPECT_EQ(Sample(text, "tensord_rpcs_total{method=\"Release\",code=\"NOT_FOUND\"}"), 1);
  EXPECT_EQ(
      Sample(text, "tensord_rpc_errors_total{method=\"Release\",reason=\"TENSOR_NOT_FOUND\"}"), 1);
  EXPECT_EQ(Sample(text, "tensord_op_calls_total{op=\"add\",device=\"cpu\"}"), 3);
  EXPECT_EQ(Sample(text, "tensord_op_duration_seconds_count{op=\"add\",device=\"cpu\"}"), 3);
  EXPECT_EQ(Sample(text, "tensord_rpc_duration_seconds_count{method=\"Execute\"}"), 3);
  EXPECT_GT(Sample(text, "tensord_rpc_received_bytes_total{method=\"PutTensor\"}"), 16);
  EXPECT_EQ(Sample(text, "tensord_sessions{tenant=\"anonymous\"}"), 1);
  // x and three sums of 4 f32 each.
  EXPECT_EQ(Sample(text, "tensord_tensors{device=\"cpu\",tenant=\"anonymous\"}"), 4);
  EXPECT_EQ(Sample(text, "tensord_tensor_bytes{device=\"cpu\",tenant=\"anonymous\"}"), 64);
  EXPECT_EQ(Sample(text, "tensord_sessions_created_total"), 1);
  EXPECT_GT(Sample(text, "process_resident_memory_bytes"), 0);
  EXPECT_NE(text.find("tensord_build_info{version=\""), std::string::npos);

  // Closing gives the memory back in the gauges.
  ASSERT_TRUE(s->Close().ok());
  const std::string after = Scrape();
  EXPECT_EQ(Sample(after, "tensord_tensor_bytes{device=\"cpu\",tenant=\"anonymous\"}"), -1);
  EXPECT_EQ(Sample(after, "tensord_device_memory_bytes{device=\"cpu\"}"), 0);
}

TEST_F(ObservedServerTest, AutodiffContextsAndBackwardPassesAreCounted) {
  absl::StatusOr<tc::Session> s = env_->client->CreateSession();
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<tc::AutodiffContext> ctx = s->OpenAutodiff();
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  EXPECT_EQ(Sample(Scrape(), "tensord_autodiff_contexts_open"), 1);
  absl::StatusOr<tc::Tensor> w =
      s->Put(tc::HostTensor(std::vector<double>{1, 2}, tc::Shape{2}),
             tc::PutOptions{.requires_grad = true, .context = ctx->id()});
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<tc::Tensor> loss = tc::Sum(*w);
  ASSERT_TRUE(loss.ok()) << loss.status();
  ASSERT_TRUE(ctx->Backward({*loss}).ok());
  EXPECT_EQ(Sample(Scrape(), "tensord_backward_passes_total{path=\"walk\"}"), 1);

  // A program's runs take the backward its compile planned (the compile's trial is not counted).
  tc::ProgramBuilder b = s->NewProgram(ctx->id());
  tc::Operand x = b.Parameter(tc::HostTensor(std::vector<double>{3, 4}, tc::Shape{2}), "x");
  tc::CallRef step_loss = b.Add("sum", {b.Add("mul", {x, *w})});
  b.Backward({step_loss.out(0)}, {*w});
  absl::StatusOr<tc::Program> program = b.Compile();
  ASSERT_TRUE(program.ok()) << program.status();
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE(
        program
            ->Run({tc::HostTensor(std::vector<double>{1, static_cast<double>(run)}, tc::Shape{2})})
            .ok());
  }
  // x bound to a requires-grad leaf: the forward records another graph, which is walked.
  absl::StatusOr<tc::Tensor> tracked =
      s->Put(tc::HostTensor(std::vector<double>{5, 6}, tc::Shape{2}),
             tc::PutOptions{.requires_grad = true, .context = ctx->id()});
  ASSERT_TRUE(tracked.ok()) << tracked.status();
  ASSERT_TRUE(program->Run({*tracked}).ok());
  const std::string text = Scrape();
  EXPECT_EQ(Sample(text, "tensord_backward_passes_total{path=\"plan\"}"), 2);
  EXPECT_EQ(Sample(text, "tensord_backward_passes_total{path=\"walk\"}"), 2);
  ASSERT_TRUE(ctx->Close().ok());
  EXPECT_EQ(Sample(Scrape(), "tensord_autodiff_contexts_open"), 0);
}

TEST_F(ObservedServerTest, TheRequestIdIsEchoedLoggedAndInTheError) {
  // A client's own id is kept: in the response metadata, the error and the log line.
  grpc::ClientContext ctx;
  ctx.AddMetadata("x-request-id", "req-7f3c.42");
  ctx.AddMetadata("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  v1::KeepAliveRequest req;
  req.set_session_id("no-such-session");
  v1::KeepAliveResponse resp;
  const grpc::Status st = stub_->KeepAlive(&ctx, req, &resp);
  ASSERT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  std::optional<google::rpc::ErrorInfo> info = tc::ErrorInfoOf(tc::FromGrpcStatus(st));
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "SESSION_NOT_FOUND");
  EXPECT_EQ(info->metadata().at("request_id"), "req-7f3c.42");
  auto echoed = ctx.GetServerInitialMetadata().find("x-request-id");
  ASSERT_NE(echoed, ctx.GetServerInitialMetadata().end());
  EXPECT_EQ(std::string(echoed->second.data(), echoed->second.size()), "req-7f3c.42");
  // The server's time, in the trailing metadata, even of a failed call.
  auto timing = ctx.GetServerTrailingMetadata().find("server-timing");
  ASSERT_NE(timing, ctx.GetServerTrailingMetadata().end());
  const std::string timing_value(timing->second.data(), timing->second.size());
  EXPECT_TRUE(std::regex_match(timing_value, std::regex(R"(tensord;dur=[0-9]+\.[0-9]{3})")))
      << timing_value;

  // None sent, or one unfit to echo: the server makes one.
  grpc::ClientContext ctx2;
  ctx2.AddMetadata("x-request-id", std::string(5000, 'x'));
  const grpc::Status st2 = stub_->KeepAlive(&ctx2, req, &resp);
  std::optional<google::rpc::ErrorInfo> info2 = tc::ErrorInfoOf(tc::FromGrpcStatus(st2));
  ASSERT_TRUE(info2.has_value());
  const std::string made = info2->metadata().at("request_id");
  EXPECT_TRUE(std::regex_match(made, std::regex("[0-9a-f]{32}"))) << made;

  std::vector<std::string> lines = LogLines();
  const std::string* kept = nullptr;
  const std::string* replaced = nullptr;
  for (const std::string& line : lines) {
    if (line.find("\"request_id\":\"req-7f3c.42\"") != std::string::npos) kept = &line;
    if (line.find(made) != std::string::npos) replaced = &line;
  }
  ASSERT_NE(kept, nullptr) << "no log line for the call";
  for (const char* field :
       {"\"event\":\"rpc\"", "\"level\":\"warning\"", "\"method\":\"KeepAlive\"",
        "\"tenant\":\"anonymous\"", "\"session\":\"no-such-session\"", "\"code\":\"NOT_FOUND\"",
        "\"reason\":\"SESSION_NOT_FOUND\"", "\"duration_ms\":",
        "\"traceparent\":\"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\""}) {
    EXPECT_NE(kept->find(field), std::string::npos) << field << " not in " << *kept;
  }
  ASSERT_NE(replaced, nullptr);
  EXPECT_NE(replaced->find("\"request_id_replaced\":true"), std::string::npos) << *replaced;
  EXPECT_EQ(replaced->find(std::string(200, 'x')), std::string::npos);
}

TEST_F(ObservedServerTest, EverySuccessfulCallLogsOneInfoLine) {
  absl::StatusOr<tc::Session> s = env_->client->CreateSession();
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<tc::Tensor> x = s->Put(tc::HostTensor(std::vector<float>{1, 2}, tc::Shape{2}));
  ASSERT_TRUE(x.ok());
  absl::StatusOr<tc::Tensor> y = tc::Add(*x, *x);
  ASSERT_TRUE(y.ok());
  int rpc_lines = 0;
  for (const std::string& line : LogLines()) {
    if (line.find("\"event\":\"rpc\"") == std::string::npos) continue;
    ++rpc_lines;
    EXPECT_NE(line.find("\"level\":\"info\""), std::string::npos) << line;
    EXPECT_NE(line.find("\"code\":\"OK\""), std::string::npos) << line;
    EXPECT_TRUE(std::regex_search(line, std::regex("\"request_id\":\"[0-9a-f]{32}\""))) << line;
  }
  EXPECT_EQ(rpc_lines, 3);  // CreateSession, PutTensor, Execute
}

TEST(MetricsAddressTest, BadAddressesFailStart) {
  ServerOptions options = TestServerOptions();
  options.metrics_address = "no-port";
  absl::StatusOr<std::unique_ptr<TensordServer>> server = TensordServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("host:port"), std::string::npos);
}

}  // namespace
}  // namespace tensord::service_test
