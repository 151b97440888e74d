#include "server/service/metrics_registry.h"

#include <atomic>
#include <cmath>
#include <cstdlib>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tensord::metrics {
namespace {

// Go's strconv formatting, which Prometheus expects: integers without a fraction, +Inf, NaN.
std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrCat(static_cast<int64_t>(v));
  // The shortest of 15-17 significant digits that reads back as the same double.
  std::string text;
  for (int digits = 15; digits <= 17; ++digits) {
    text = absl::StrFormat("%.*g", digits, v);
    if (std::strtod(text.c_str(), nullptr) == v) break;
  }
  return text;
}

// `values` padded with "" (or cut) to `n` label values.
absl::InlinedVector<absl::string_view, 4> Padded(LabelViews values, size_t n) {
  absl::InlinedVector<absl::string_view, 4> out(n);
  for (size_t i = 0; i < n && i < values.size(); ++i) out[i] = values[i];
  return out;
}

// The entry of `series` for `key`, made (with the key copied) when there is none.
template <typename Map>
typename Map::mapped_type& Entry(Map& series,
                                 const absl::InlinedVector<absl::string_view, 4>& key) {
  auto it = series.find(key);
  if (it == series.end()) {
    it = series.emplace(LabelValues(key.begin(), key.end()), typename Map::mapped_type{}).first;
  }
  return it->second;
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) bounds.push_back(b);
  return bounds;
}

Family::Family(std::string name, std::string help, std::vector<std::string> label_names)
    : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}

std::string Family::SeriesName(absl::string_view suffix, const LabelValues& values,
                               absl::string_view extra) const {
  std::string out = absl::StrCat(name_, suffix);
  if (label_names_.empty() && extra.empty()) return out;
  out += '{';
  bool first = true;
  for (size_t i = 0; i < label_names_.size(); ++i) {
    absl::StrAppend(&out, first ? "" : ",", label_names_[i], "=\"",
                    EscapeLabelValue(i < values.size() ? values[i] : ""), "\"");
    first = false;
  }
  if (!extra.empty()) absl::StrAppend(&out, first ? "" : ",", extra);
  out += '}';
  return out;
}

void Family::RenderHeader(std::string& out, absl::string_view type) const {
  absl::StrAppend(&out, "# HELP ", name_, " ", EscapeHelp(help_), "\n# TYPE ", name_, " ", type,
                  "\n");
}

size_t MetricShard() {
  static std::atomic<size_t> next{0};
  thread_local const size_t shard = next.fetch_add(1, std::memory_order_relaxed) % kMetricShards;
  return shard;
}

void CounterFamily::Add(LabelViews values, double amount) {
  const auto key = Padded(values, label_names_.size());
  Shard& shard = shards_[MetricShard()];
  absl::MutexLock lock(&shard.mu);
  Entry(shard.series, key) += amount;
}

void CounterFamily::Render(std::string& out) const {
  RenderHeader(out, "counter");
  std::map<LabelValues, double> series;
  for (const Shard& shard : shards_) {
    absl::MutexLock lock(&shard.mu);
    for (const auto& [values, v] : shard.series) series[values] += v;
  }
  // A counter without labels is shown from the start (at 0), so a query finds it at once.
  if (series.empty() && label_names_.empty()) absl::StrAppend(&out, name_, " 0\n");
  for (const auto& [values, v] : series) {
    absl::StrAppend(&out, SeriesName("", values), " ", Number(v), "\n");
  }
}

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> label_names,
                                 std::vector<double> upper_bounds)
    : Family(std::move(name), std::move(help), std::move(label_names)),
      upper_bounds_(std::move(upper_bounds)) {}

void HistogramFamily::Observe(LabelViews values, double value) { ObserveAll(values, {&value, 1}); }

void HistogramFamily::ObserveAll(LabelViews values, absl::Span<const double> observed) {
  const auto key = Padded(values, label_names_.size());
  Shard& shard = shards_[MetricShard()];
  absl::MutexLock lock(&shard.mu);
  Series& s = Entry(shard.series, key);
  if (s.buckets.empty()) s.buckets.assign(upper_bounds_.size(), 0);
  for (double value : observed) {
    for (size_t i = 0; i < upper_bounds_.size(); ++i) {
      if (value <= upper_bounds_[i]) {
        ++s.buckets[i];
        break;
      }
    }
    ++s.count;
    s.sum += value;
  }
}

void HistogramFamily::Render(std::string& out) const {
  RenderHeader(out, "histogram");
  std::map<LabelValues, Series> series;
  for (const Shard& shard : shards_) {
    absl::MutexLock lock(&shard.mu);
    for (const auto& [values, part] : shard.series) {
      Series& s = series[values];
      if (s.buckets.empty()) s.buckets.assign(upper_bounds_.size(), 0);
      for (size_t i = 0; i < upper_bounds_.size(); ++i) s.buckets[i] += part.buckets[i];
      s.count += part.count;
      s.sum += part.sum;
    }
  }
  for (const auto& [values, s] : series) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < upper_bounds_.size(); ++i) {
      cumulative += s.buckets[i];
      absl::StrAppend(
          &out,
          SeriesName("_bucket", values, absl::StrCat("le=\"", Number(upper_bounds_[i]), "\"")), " ",
          cumulative, "\n");
    }
    absl::StrAppend(&out, SeriesName("_bucket", values, "le=\"+Inf\""), " ", s.count, "\n");
    absl::StrAppend(&out, SeriesName("_sum", values), " ", Number(s.sum), "\n");
    absl::StrAppend(&out, SeriesName("_count", values), " ", s.count, "\n");
  }
}

GaugeFamily::GaugeFamily(std::string name, std::string help, std::vector<std::string> label_names,
                         Collect collect, std::string type)
    : Family(std::move(name), std::move(help), std::move(label_names)),
      collect_(std::move(collect)),
      type_(std::move(type)) {}

void GaugeFamily::Render(std::string& out) const {
  RenderHeader(out, type_);
  for (const GaugeSample& s : collect_()) {
    absl::StrAppend(&out, SeriesName("", s.labels), " ", Number(s.value), "\n");
  }
}

CounterFamily& Registry::Counter(std::string name, std::string help,
                                 std::vector<std::string> label_names) {
  auto family =
      std::make_unique<CounterFamily>(std::move(name), std::move(help), std::move(label_names));
  CounterFamily& ref = *family;
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return ref;
}

HistogramFamily& Registry::Histogram(std::string name, std::string help,
                                     std::vector<std::string> label_names,
                                     std::vector<double> upper_bounds) {
  auto family = std::make_unique<HistogramFamily>(std::move(name), std::move(help),
                                                  std::move(label_names), std::move(upper_bounds));
  HistogramFamily& ref = *family;
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return ref;
}

void Registry::Gauge(std::string name, std::string help, std::vector<std::string> label_names,
                     GaugeFamily::Collect collect, std::string type) {
  auto family =
      std::make_unique<GaugeFamily>(std::move(name), std::move(help), std::move(label_names),
                                    std::move(collect), std::move(type));
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
}

std::string Registry::Render() const {
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& family : families_) family->Render(out);
  return out;
}

}  // namespace tensord::metrics
