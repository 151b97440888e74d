// The parts of tensordctl stats that need no server: its reader of the Prometheus text format
// (hand-written pages, and what the server's own registry renders), the report made from two
// scrapes, and the units it writes.
#include "client/cpp/tensordctl_stats_report.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cpp/tensordctl_format.h"
#include "client/cpp/tensordctl_prometheus.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/service/metrics_registry.h"

namespace tensord {
namespace {

using ::tensordctl::MetricSample;
using ::tensordctl::ParsePrometheusText;
using ::tensordctl::Scrape;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(PrometheusTextTest, SamplesLabelsAndSpecialValues) {
  absl::StatusOr<std::vector<MetricSample>> samples = ParsePrometheusText(
      "# HELP x_total Calls.\n"
      "# TYPE x_total counter\n"
      "\n"
      "x_total{kind=\"a\\\"b\\\\c\\nd\",empty=\"\"} 2\n"
      "x_total{ kind = \"plain\" , } 1e3 1700000000000\r\n"
      "x_seconds_bucket{le=\"+Inf\"} +Inf\n"
      "x_down -Inf\n"
      "x_unknown NaN\n"
      "  # an indented comment\n"
      "x:recorded{a=\"{b=c}\"}\t0.25");
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 6u);
  const MetricSample& escaped = (*samples)[0];
  EXPECT_EQ(escaped.name, "x_total");
  EXPECT_THAT(escaped.labels, testing::ElementsAre(Pair("kind", "a\"b\\c\nd"), Pair("empty", "")));
  EXPECT_EQ(escaped.value, 2);
  EXPECT_EQ(escaped.Label("missing"), "");
  EXPECT_EQ((*samples)[1].Label("kind"), "plain");
  EXPECT_EQ((*samples)[1].value, 1000);
  EXPECT_EQ((*samples)[2].Label("le"), "+Inf");
  EXPECT_TRUE(std::isinf((*samples)[2].value) && (*samples)[2].value > 0);
  EXPECT_TRUE(std::isinf((*samples)[3].value) && (*samples)[3].value < 0);
  EXPECT_TRUE(std::isnan((*samples)[4].value));
  EXPECT_EQ((*samples)[5].name, "x:recorded");
  EXPECT_EQ((*samples)[5].Label("a"), "{b=c}");
  EXPECT_EQ((*samples)[5].value, 0.25);
  ASSERT_TRUE(ParsePrometheusText("").ok());
  EXPECT_TRUE(ParsePrometheusText("")->empty());
}

TEST(PrometheusTextTest, ReadsWhatTheServerRenders) {
  metrics::Registry r;
  r.Counter("x_calls_total", "Calls.\nBy \\kind.", {"kind", "op"})
      .Add({"a\"b\\c\nd", "{x=\"1\",y}"}, 2.5);
  r.Histogram("x_seconds", "Time.", {}, {0.1}).Observe({}, 0.05);
  absl::StatusOr<std::vector<MetricSample>> samples = ParsePrometheusText(r.Render());
  ASSERT_TRUE(samples.ok()) << samples.status() << "\n" << r.Render();
  ASSERT_EQ(samples->size(), 5u) << r.Render();
  EXPECT_EQ((*samples)[0].Label("kind"), "a\"b\\c\nd");
  EXPECT_EQ((*samples)[0].Label("op"), "{x=\"1\",y}");
  EXPECT_EQ((*samples)[0].value, 2.5);
  EXPECT_EQ((*samples)[2].Label("le"), "+Inf");
  EXPECT_EQ((*samples)[3].name, "x_seconds_sum");
}

TEST(PrometheusTextTest, RefusesWhatIsNotTheFormat) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"<html><body>Not found</body></html>", "line 1: no metric name"},
      {"ok 1\nx{a=\"open} 1", "line 2: a label value has no closing quote"},
      {"x{a=\"\\t\"} 1", "unknown escape \\t"},
      {"x{a=b} 1", "must be quoted"},
      {"x{a=\"b\" c=\"d\"} 1", "separated by ','"},
      {"x{=\"b\"} 1", "no label name"},
      {"x", "line 1: no value"},
      {"x{a=\"b\"}", "no value"},
      {"x{a=\"b\"}1", "no space before the value"},
      {"x one", "'one' is not a number"},
      {"x 1 2 3", "at most a timestamp"},
      {"x 1 soon", "'soon' is not a timestamp"},
  };
  for (const auto& [text, error] : cases) {
    absl::StatusOr<std::vector<MetricSample>> samples = ParsePrometheusText(text);
    ASSERT_FALSE(samples.ok()) << text;
    EXPECT_EQ(samples.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(samples.status().message()), HasSubstr(error)) << text;
  }
}

Scrape ScrapeOf(const std::string& text, double at_seconds) {
  absl::StatusOr<std::vector<MetricSample>> samples = ParsePrometheusText(text);
  EXPECT_TRUE(samples.ok()) << samples.status();
  Scrape scrape;
  if (samples.ok()) scrape.samples = *samples;
  scrape.at_seconds = at_seconds;
  scrape.unix_seconds = 1000 + at_seconds;
  return scrape;
}

TEST(StatsReportTest, GaugesOfTheSecondScrapeAndRatesBetweenBoth) {
  std::string common =
      "tensord_build_info{version=\"9.8.7\",grpc_version=\"1\",onednn_version=\"2\"} 1\n"
      "process_start_time_seconds 900\n";
  std::string before =
      common +
      "tensord_rpcs_total{method=\"Execute\",code=\"OK\"} 100\n"
      "tensord_rpcs_total{method=\"Release\",code=\"NOT_FOUND\"} 2\n"
      "tensord_rpc_errors_total{method=\"Release\",reason=\"TENSOR_NOT_FOUND\"} 2\n"
      "tensord_op_calls_total{op=\"add\",device=\"cpu\"} 10\n"
      "tensord_op_calls_total{op=\"matmul\",device=\"cpu\"} 5\n"
      "tensord_op_calls_total{op=\"relu\",device=\"cpu\"} 50\n";
  std::string after =
      common +
      "tensord_sessions{tenant=\"team-a\"} 2\n"
      "tensord_sessions{tenant=\"b\\\"q\"} 1\n"
      "tensord_sessions{tenant=\"idle\"} 0\n"
      "tensord_tensor_bytes{device=\"cpu\",tenant=\"team-a\"} 3145728\n"
      "tensord_tensor_bytes{device=\"cpu\",tenant=\"b\\\"q\"} 512\n"
      "tensord_device_memory_bytes{device=\"cpu\"} 3146240\n"
      "process_resident_memory_bytes 1.5e+08\n"
      "tensord_rpcs_total{method=\"Execute\",code=\"OK\"} 140\n"
      "tensord_rpcs_total{method=\"Release\",code=\"NOT_FOUND\"} 12\n"
      "tensord_rpc_errors_total{method=\"Release\",reason=\"TENSOR_NOT_FOUND\"} 12\n"
      "tensord_op_calls_total{op=\"add\",device=\"cpu\"} 30\n"
      "tensord_op_calls_total{op=\"matmul\",device=\"cpu\"} 5\n"
      // A counter that went down was reset: it counts from 0 again.
      "tensord_op_calls_total{op=\"relu\",device=\"cpu\"} 4\n";
  // Eleven more ops, one call each before and after: beyond the top ten.
  for (int i = 0; i < 11; ++i) {
    const std::string line =
        absl::StrCat("tensord_op_calls_total{op=\"op", i, "\",device=\"cpu\"} 1\n");
    before += line;
    after += line;
  }
  const std::string report =
      tensordctl::RenderStats(ScrapeOf(before, 10), ScrapeOf(after, 12), "http://h:1/metrics");
  EXPECT_THAT(report, HasSubstr("tensord 9.8.7 at http://h:1/metrics, up 1m52s, rates over "
                                "2.00 s\n\n"));
  EXPECT_THAT(report, ContainsRegex("\nsessions +3\n  team-a +2\n  b\"q +1\nmemory by device\n"));
  EXPECT_THAT(report, ContainsRegex("\n  cpu +3\\.0 MiB\nmemory by tenant\n  team-a +3\\.0 MiB\n"
                                    "  b\"q +512 B\nserver RSS +143\\.1 MiB\n"));
  // 50 calls in 2 s, 10 of them failed.
  EXPECT_THAT(report, ContainsRegex("\n  all +25\\.0 +152\n"));
  EXPECT_THAT(report, ContainsRegex("\n  errors +5\\.0 +12  20\\.0% of calls\n"));
  EXPECT_THAT(report, ContainsRegex("\n  TENSOR_NOT_FOUND +5\\.0 +12\n"));
  // Most frequent first, then by total; relu's 4 calls since its reset make 2/s.
  EXPECT_THAT(report, ContainsRegex("\nop +calls/s +total\n  add +10\\.0 +30\n  relu +2\\.0 +4\n"
                                    "  matmul +0\\.0 +5\n  op0 +0\\.0 +1\n"));
  EXPECT_THAT(report, HasSubstr("  (4 more ops)\n"));
  EXPECT_EQ(std::string(report).find("idle"), std::string::npos) << "a tenant without sessions";
}

TEST(StatsReportTest, AQuietServer) {
  const std::string page = "tensord_build_info{version=\"1\"} 1\n";
  const std::string report =
      tensordctl::RenderStats(ScrapeOf(page, 0), ScrapeOf(page, 1), "http://h:1/metrics");
  EXPECT_THAT(report, ContainsRegex("\nsessions +0\n"));
  EXPECT_THAT(report, HasSubstr("memory by tenant\n  (none)\n"));
  EXPECT_THAT(report, ContainsRegex("\n  errors +0\\.0 +0\n"));
  EXPECT_THAT(report, HasSubstr("  (no op calls yet)\n"));
}

TEST(HumanUnitsTest, BytesAndDurations) {
  EXPECT_EQ(tensordctl::HumanBytes(0), "0 B");
  EXPECT_EQ(tensordctl::HumanBytes(1023), "1023 B");
  EXPECT_EQ(tensordctl::HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(tensordctl::HumanBytes(3 << 20), "3.0 MiB");
  EXPECT_EQ(tensordctl::HumanBytes(5.5 * (1 << 30)), "5.5 GiB");
  EXPECT_EQ(tensordctl::HumanDuration(0.4), "0.40 s");
  EXPECT_EQ(tensordctl::HumanDuration(42), "42.0 s");
  EXPECT_EQ(tensordctl::HumanDuration(123), "2m03s");
  EXPECT_EQ(tensordctl::HumanDuration(3 * 3600 + 120), "3h02m");
  EXPECT_EQ(tensordctl::HumanDuration(-1), "-");
}

}  // namespace
}  // namespace tensord
