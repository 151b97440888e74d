// Counters, gauges and histograms with labels, rendered in the Prometheus text exposition
// format (version 0.0.4). Debian has no Prometheus client library for C++, and the format is
// small; this holds only what tensord uses. Families are created once at start-up and live as
// long as the registry. Recording is thread-safe: a family keeps its series in shards, and a
// thread records into the shard it was given (MetricShard), under that shard's lock only, so
// calls on different threads do not queue on one lock per family; a scrape sums the shards.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace tensord::metrics {

using LabelValues = std::vector<std::string>;
// Label values as a recording passes them: views of the caller's strings, one per label name
// (fewer are padded with ""). A series is found by them without copying; only a series not
// seen before copies them into its LabelValues.
using LabelViews = absl::Span<const absl::string_view>;
// Orders LabelValues and views of them alike (lexicographically), so maps find either.
struct LabelOrder {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return std::lexicographical_compare(
        a.begin(), a.end(), b.begin(), b.end(),
        [](absl::string_view x, absl::string_view y) { return x < y; });
  }
};

inline constexpr size_t kMetricShards = 16;
// The calling thread's shard: given round-robin at its first recording, kept for its life.
size_t MetricShard();

// One sample of a gauge computed when scraped.
struct GaugeSample {
  LabelValues labels;
  double value = 0;
};

class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names);
  virtual ~Family() = default;
  const std::string& name() const { return name_; }
  // Appends "# HELP", "# TYPE" and the samples.
  virtual void Render(std::string& out) const = 0;

 protected:
  // `name{label="value",...}` with `extra` (e.g. le="0.5") appended to the labels.
  std::string SeriesName(absl::string_view suffix, const LabelValues& values,
                         absl::string_view extra = "") const;
  void RenderHeader(std::string& out, absl::string_view type) const;

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
};

// A monotonically increasing value per label combination (`tensord_rpcs_total`).
class CounterFamily final : public Family {
 public:
  using Family::Family;
  void Add(LabelViews values, double amount = 1);
  void Render(std::string& out) const override;

 private:
  struct Shard {
    mutable absl::Mutex mu;
    std::map<LabelValues, double, LabelOrder> series ABSL_GUARDED_BY(mu);
  };
  std::array<Shard, kMetricShards> shards_;
};

// Observations counted into cumulative buckets, with their sum and count.
class HistogramFamily final : public Family {
 public:
  HistogramFamily(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> upper_bounds);
  void Observe(LabelViews values, double value);
  // The same as Observe of each value in turn, with one lock and one series lookup.
  void ObserveAll(LabelViews values, absl::Span<const double> observed);
  void Render(std::string& out) const override;

 private:
  struct Series {
    std::vector<uint64_t> buckets;  // per upper bound, not cumulative; +Inf is `count`
    uint64_t count = 0;
    double sum = 0;
  };
  struct Shard {
    mutable absl::Mutex mu;
    std::map<LabelValues, Series, LabelOrder> series ABSL_GUARDED_BY(mu);
  };
  const std::vector<double> upper_bounds_;
  std::array<Shard, kMetricShards> shards_;
};

// A value read when scraped (sessions open, bytes in use): the callback returns every sample.
// Typed "gauge", or "counter" for a total kept elsewhere (the kernel's CPU time).
class GaugeFamily final : public Family {
 public:
  using Collect = std::function<std::vector<GaugeSample>()>;
  GaugeFamily(std::string name, std::string help, std::vector<std::string> label_names,
              Collect collect, std::string type = "gauge");
  void Render(std::string& out) const override;

 private:
  const Collect collect_;
  const std::string type_;
};

class Registry {
 public:
  CounterFamily& Counter(std::string name, std::string help,
                         std::vector<std::string> label_names = {});
  HistogramFamily& Histogram(std::string name, std::string help,
                             std::vector<std::string> label_names,
                             std::vector<double> upper_bounds);
  void Gauge(std::string name, std::string help, std::vector<std::string> label_names,
             GaugeFamily::Collect collect, std::string type = "gauge");
  // Every family in the order created.
  std::string Render() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Family>> families_ ABSL_GUARDED_BY(mu_);
};

// Exponential bucket bounds: start, start*factor, ... (count bounds).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// A label value or HELP text escaped for the text format (\\, \", \n).
std::string EscapeLabelValue(absl::string_view value);

}  // namespace tensord::metrics
