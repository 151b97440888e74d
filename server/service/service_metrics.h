// tensord's metrics (docs/operations.md lists them): what the RPC layer and the batch runner
// record as they go, and the gauges read from the sessions when Prometheus scrapes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/service/metrics_registry.h"

namespace tensord {

class SessionManager;

// Tenants shown by name in the per-tenant gauges; the rest are summed as tenant="_other", so a
// server with many tenants does not flood Prometheus with series.
inline constexpr size_t kMaxMetricTenants = 100;

// The op timings of one batch or program run, handed to the metrics at its end: one lock and
// one series lookup per op and metric instead of per call (a program may run thousands).
class OpTimings {
 public:
  void Add(const std::string& op, absl::Duration took) {
    auto it = seconds_.find(op);
    if (it == seconds_.end()) it = seconds_.try_emplace(op).first;
    it->second.push_back(absl::ToDoubleSeconds(took));
  }

 private:
  friend class ServiceMetrics;
  absl::flat_hash_map<std::string, std::vector<double>> seconds_;
};

class ServiceMetrics {
 public:
  // `plugin_ops`: ops the server's plugins added.
  ServiceMetrics(const SessionManager& sessions, int64_t plugin_ops);
  ServiceMetrics(const ServiceMetrics&) = delete;
  ServiceMetrics& operator=(const ServiceMetrics&) = delete;

  // One finished RPC. `code` is the gRPC code's name ("OK", "NOT_FOUND"), `reason` the
  // ErrorInfo reason (empty when it succeeded).
  void RecordRpc(absl::string_view method, absl::string_view code, absl::string_view reason,
                 absl::Duration duration, int64_t bytes_in, int64_t bytes_out);
  // The op calls of an Execute batch or a program run, on `device`.
  void RecordOps(const OpTimings& timings, const std::string& device);
  // A backward pass that succeeded: "walk" where it walked its graph (the Backward RPC, a
  // program run whose graph was not the planned one), "plan" where a program ran its plan.
  void RecordBackward(absl::string_view path);
  void RecordSessionCreated();
  void RecordSessionExpired(int64_t sessions);

  // The exposition text of every metric.
  std::string Render() const { return registry_.Render(); }

 private:
  metrics::Registry registry_;
  metrics::CounterFamily& rpcs_;
  metrics::CounterFamily& errors_;
  metrics::HistogramFamily& rpc_seconds_;
  metrics::CounterFamily& received_bytes_;
  metrics::CounterFamily& sent_bytes_;
  metrics::CounterFamily& op_calls_;
  metrics::HistogramFamily& op_seconds_;
  metrics::CounterFamily& backward_passes_;
  metrics::CounterFamily& sessions_created_;
  metrics::CounterFamily& sessions_expired_;
};

}  // namespace tensord
