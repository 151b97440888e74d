// The metrics registry records each thread into a shard of its own and sums the shards when
// scraped: what many threads record at once must render as the exact totals, in the
// Prometheus text format, as if one thread had recorded it all.
#include "server/service/metrics_registry.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tensord::metrics {
namespace {

TEST(MetricsRegistry, ManyThreadsRenderTheTotalsOfEveryShard) {
  Registry registry;
  CounterFamily& calls = registry.Counter("calls_total", "Calls.", {"method"});
  HistogramFamily& seconds =
      registry.Histogram("call_seconds", "Call time.", {"method"}, {0.5, 1.0});
  constexpr int kThreads = 2 * static_cast<int>(kMetricShards) + 3, kEach = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        calls.Add({t % 2 == 0 ? "Execute" : "GetTensor"});
        seconds.Observe({"Execute"}, i % 4 == 0 ? 0.5 : 2.0);  // 1 in 4 at most 0.5
      }
    });
  }
  for (std::thread& t : threads) t.join();

  const std::string text = registry.Render();
  const int even = (kThreads + 1) / 2, odd = kThreads / 2;
  EXPECT_NE(text.find("calls_total{method=\"Execute\"} " + std::to_string(even * kEach) + "\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("calls_total{method=\"GetTensor\"} " + std::to_string(odd * kEach) + "\n"),
            std::string::npos)
      << text;
  const int total = kThreads * kEach, low = kThreads * kEach / 4;
  for (const std::string& line :
       {"call_seconds_bucket{method=\"Execute\",le=\"0.5\"} " + std::to_string(low),
        "call_seconds_bucket{method=\"Execute\",le=\"1\"} " + std::to_string(low),
        "call_seconds_bucket{method=\"Execute\",le=\"+Inf\"} " + std::to_string(total),
        "call_seconds_count{method=\"Execute\"} " + std::to_string(total),
        "call_seconds_sum{method=\"Execute\"} " +
            std::to_string(static_cast<int>(low * 0.5 + (total - low) * 2.0))}) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\n" << text;
  }
  // Each series once, however many shards recorded it.
  EXPECT_EQ(text.find("calls_total{method=\"Execute\"}"),
            text.rfind("calls_total{method=\"Execute\"}"));
}

TEST(MetricsRegistry, ACounterWithoutLabelsShowsZeroBeforeAnyRecording) {
  Registry registry;
  registry.Counter("sessions_created_total", "Sessions created.");
  EXPECT_NE(registry.Render().find("sessions_created_total 0\n"), std::string::npos);
}

}  // namespace
}  // namespace tensord::metrics
