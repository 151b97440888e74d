#include "client/cpp/tensordctl_stats_report.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cpp/tensordctl_format.h"

namespace tensordctl {
namespace {

constexpr size_t kTop = 10;

using Filter = std::function<bool(const MetricSample&)>;

// The samples of `metric` summed by the value of `label`; a sample `keep` rejects is left out.
std::map<std::string, double> SumBy(const Scrape& scrape, absl::string_view metric,
                                    absl::string_view label, const Filter& keep = nullptr) {
  std::map<std::string, double> sums;
  for (const MetricSample& s : scrape.samples) {
    if (s.name != metric || (keep && !keep(s)) || std::isnan(s.value)) continue;
    sums[s.Label(label)] += s.value;
  }
  return sums;
}

double Total(const Scrape& scrape, absl::string_view metric, const Filter& keep = nullptr) {
  double total = 0;
  for (const auto& [unused, v] : SumBy(scrape, metric, "", keep)) total += v;
  return total;
}

// A counter's growth between two scrapes. One that went down was reset (the server restarted
// in between): it counted from 0, as Prometheus' rate() assumes.
double Increase(double before, double after) { return after >= before ? after - before : after; }

// The nonzero entries, largest first (then by name), at most kTop of them.
std::vector<std::pair<std::string, double>> Largest(const std::map<std::string, double>& sums) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [name, v] : sums) {
    if (v != 0) out.emplace_back(name, v);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (out.size() > kTop) out.resize(kTop);
  return out;
}

struct CounterRow {
  std::string name;
  double rate = 0;   // per second between the scrapes
  double total = 0;  // since the server started
};

// A counter by `label`: most frequent over the interval first, then the largest totals.
std::vector<CounterRow> CounterRows(const Scrape& before, const Scrape& after,
                                    absl::string_view metric, absl::string_view label,
                                    double seconds, size_t* left_out) {
  const std::map<std::string, double> was = SumBy(before, metric, label);
  std::vector<CounterRow> rows;
  for (const auto& [name, total] : SumBy(after, metric, label)) {
    if (total == 0) continue;
    auto it = was.find(name);
    rows.push_back({name, Increase(it == was.end() ? 0 : it->second, total) / seconds, total});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const CounterRow& a, const CounterRow& b) {
    return a.rate != b.rate ? a.rate > b.rate : a.total > b.total;
  });
  *left_out = rows.size() > kTop ? rows.size() - kTop : 0;
  if (rows.size() > kTop) rows.resize(kTop);
  return rows;
}

// One line: a name, a value and, for counters, a total, in columns.
void Line(std::string& out, absl::string_view name, absl::string_view value,
          absl::string_view total = "", absl::string_view note = "") {
  std::string line = absl::StrFormat("%-24s %10s", name, value);
  if (!total.empty()) absl::StrAppend(&line, absl::StrFormat(" %10s", total));
  if (!note.empty()) absl::StrAppend(&line, "  ", note);
  absl::StrAppend(&out, line, "\n");
}

std::string Rate(double per_second) { return absl::StrFormat("%.1f", per_second); }
std::string Count(double n) { return absl::StrFormat("%.0f", n); }

std::string Header(const Scrape& after, const std::string& source, double seconds) {
  const MetricSample* build = FindSample(after, "tensord_build_info");
  std::string out = absl::StrCat("tensord ", build ? build->Label("version") : "(unknown version)",
                                 " at ", source);
  // Wall clocks of two machines: an uptime that makes no sense is left out.
  if (const MetricSample* start = FindSample(after, "process_start_time_seconds")) {
    const double up = after.unix_seconds - start->value;
    if (up >= 0 && std::isfinite(up)) absl::StrAppend(&out, ", up ", HumanDuration(up));
  }
  absl::StrAppend(&out, ", rates over ", HumanDuration(seconds), "\n\n");
  return out;
}

void Sessions(std::string& out, const Scrape& after) {
  const std::map<std::string, double> by_tenant = SumBy(after, "tensord_sessions", "tenant");
  double total = 0;
  for (const auto& [unused, n] : by_tenant) total += n;
  Line(out, "sessions", Count(total));
  for (const auto& [tenant, n] : Largest(by_tenant)) Line(out, "  " + tenant, Count(n));
}

void Memory(std::string& out, const Scrape& after) {
  out += "memory by device\n";
  for (const auto& [device, bytes] : SumBy(after, "tensord_device_memory_bytes", "device")) {
    Line(out, "  " + device, HumanBytes(bytes));
  }
  out += "memory by tenant\n";
  const auto tenants = Largest(SumBy(after, "tensord_tensor_bytes", "tenant"));
  if (tenants.empty()) out += "  (none)\n";
  for (const auto& [tenant, bytes] : tenants) Line(out, "  " + tenant, HumanBytes(bytes));
  if (const MetricSample* rss = FindSample(after, "process_resident_memory_bytes")) {
    Line(out, "server RSS", HumanBytes(rss->value));
  }
}

void Rpcs(std::string& out, const Scrape& before, const Scrape& after, double seconds) {
  const Filter failed = [](const MetricSample& s) { return s.Label("code") != "OK"; };
  const double calls =
      Increase(Total(before, "tensord_rpcs_total"), Total(after, "tensord_rpcs_total"));
  const double errors = Increase(Total(before, "tensord_rpcs_total", failed),
                                 Total(after, "tensord_rpcs_total", failed));
  Line(out, "rpcs", "per s", "total");
  Line(out, "  all", Rate(calls / seconds), Count(Total(after, "tensord_rpcs_total")));
  Line(out, "  errors", Rate(errors / seconds), Count(Total(after, "tensord_rpcs_total", failed)),
       calls > 0 ? absl::StrFormat("%.1f%% of calls", 100 * errors / calls) : "");
  size_t left_out = 0;
  for (const CounterRow& row :
       CounterRows(before, after, "tensord_rpc_errors_total", "reason", seconds, &left_out)) {
    Line(out, "  " + row.name, Rate(row.rate), Count(row.total));
  }
  if (left_out > 0) absl::StrAppend(&out, "  (", left_out, " more reasons)\n");
}

void Ops(std::string& out, const Scrape& before, const Scrape& after, double seconds) {
  size_t left_out = 0;
  const std::vector<CounterRow> rows =
      CounterRows(before, after, "tensord_op_calls_total", "op", seconds, &left_out);
  Line(out, "op", "calls/s", "total");
  if (rows.empty()) out += "  (no op calls yet)\n";
  for (const CounterRow& row : rows) Line(out, "  " + row.name, Rate(row.rate), Count(row.total));
  if (left_out > 0) absl::StrAppend(&out, "  (", left_out, " more ops)\n");
}

}  // namespace

const MetricSample* FindSample(const Scrape& scrape, absl::string_view name) {
  for (const MetricSample& s : scrape.samples) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string RenderStats(const Scrape& before, const Scrape& after, const std::string& source) {
  // Scrapes a moment apart still give a finite rate.
  const double seconds = std::max(after.at_seconds - before.at_seconds, 1e-3);
  std::string out = Header(after, source, seconds);
  Sessions(out, after);
  Memory(out, after);
  out += "\n";
  Rpcs(out, before, after, seconds);
  out += "\n";
  Ops(out, before, after, seconds);
  return out;
}

}  // namespace tensordctl
