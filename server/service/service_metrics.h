// tensord's metrics (docs/operations.md lists them): what the RPC layer and the batch runner
// record as they go, and the gauges read from the sessions when Prometheus scrapes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/service/metrics_registry.h"

namespace tensord {

class SessionManager;

// Tenants shown by name in the per-tenant gauges; the rest are summed as tenant="_other", so a
// server with many tenants does not flood Prometheus with series.
inline constexpr size_t kMaxMetricTenants = 100;

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
  // One op call of an Execute batch, on `device`.
  void RecordOp(const std::string& op, const std::string& device, absl::Duration duration);
  void RecordBackward();
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
