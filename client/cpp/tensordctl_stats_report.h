// The report of tensordctl stats, made from two scrapes of a server's /metrics: the gauges
// (sessions, memory) as of the second, the counters (RPCs, errors, op calls) as rates between
// the two.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/cpp/tensordctl_prometheus.h"

namespace tensordctl {

struct Scrape {
  std::vector<MetricSample> samples;
  double at_seconds = 0;    // a steady clock's reading when the page was rendered (for rates)
  double unix_seconds = 0;  // the wall clock then (for the server's uptime)
};

// The first sample named `name`, or null.
const MetricSample* FindSample(const Scrape& scrape, absl::string_view name);

// The report, several lines; `source` names the endpoint in its first line. Lists are
// limited to their 10 largest entries.
std::string RenderStats(const Scrape& before, const Scrape& after, const std::string& source);

}  // namespace tensordctl
