#include "server/service/service_metrics.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dnnl.hpp"
#include "grpcpp/grpcpp.h"
#include "server/core/device_block_cache.h"
#include "server/core/host_memory.h"
#include "server/service/session.h"

#ifndef TENSORD_VERSION_STRING
#define TENSORD_VERSION_STRING "unknown"
#endif

namespace tensord {
namespace {

using metrics::GaugeSample;
using metrics::LabelValues;

// RPC latencies: 100 µs (a small call on loopback) to 60 s (a large transfer or backward).
std::vector<double> RpcBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
}

// Op latencies: 1 µs (an add of a few elements) to 10 s.
std::vector<double> OpBuckets() { return metrics::ExponentialBuckets(1e-6, 4, 12); }

// Per-tenant sums, the kMaxMetricTenants largest by bytes by name and the rest as "_other".
struct TenantUsage {
  int64_t sessions = 0;
  std::map<std::string, std::pair<int64_t, int64_t>> by_device;  // device -> (tensors, bytes)
  int64_t bytes = 0;
};

std::map<std::string, TenantUsage> UsageByTenant(const SessionManager& sessions) {
  std::map<std::string, TenantUsage> by_tenant;
  for (const SessionUsage& s : sessions.Usage()) {
    TenantUsage& t = by_tenant[s.tenant];
    ++t.sessions;
    auto& [tensors, bytes] = t.by_device[s.device];
    tensors += s.tensors;
    bytes += s.bytes;
    t.bytes += s.bytes;
  }
  if (by_tenant.size() <= kMaxMetricTenants) return by_tenant;
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& [tenant, usage] : by_tenant) order.emplace_back(-usage.bytes, tenant);
  std::sort(order.begin(), order.end());
  std::map<std::string, TenantUsage> bounded;
  TenantUsage& other = bounded["_other"];
  for (size_t i = 0; i < order.size(); ++i) {
    TenantUsage& from = by_tenant[order[i].second];
    if (i < kMaxMetricTenants - 1) {
      bounded[order[i].second] = std::move(from);
      continue;
    }
    other.sessions += from.sessions;
    other.bytes += from.bytes;
    for (const auto& [device, tb] : from.by_device) {
      other.by_device[device].first += tb.first;
      other.by_device[device].second += tb.second;
    }
  }
  return bounded;
}

// The process's resident memory and CPU time, as Prometheus' own process collector names them.
double ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double CpuSeconds() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces), from its closing parenthesis:
  // state is field 3, utime and stime are fields 14 and 15.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string OneDnnVersion() {
  const dnnl_version_t* v = dnnl_version();
  return absl::StrCat(v->major, ".", v->minor, ".", v->patch);
}

}  // namespace

ServiceMetrics::ServiceMetrics(const SessionManager& sessions, int64_t plugin_ops)
    : rpcs_(registry_.Counter("tensord_rpcs_total", "RPCs finished, by method and gRPC code.",
                              {"method", "code"})),
      errors_(registry_.Counter("tensord_rpc_errors_total",
                                "Failed RPCs by method and error reason (docs/errors.md).",
                                {"method", "reason"})),
      rpc_seconds_(registry_.Histogram("tensord_rpc_duration_seconds",
                                       "Time from a call's arrival to its status, by method.",
                                       {"method"}, RpcBuckets())),
      received_bytes_(registry_.Counter("tensord_rpc_received_bytes_total",
                                        "Request message bytes received, by method.", {"method"})),
      sent_bytes_(registry_.Counter("tensord_rpc_sent_bytes_total",
                                    "Response message bytes sent, by method.", {"method"})),
      op_calls_(registry_.Counter("tensord_op_calls_total",
                                  "Op calls run in Execute batches, by op and device.",
                                  {"op", "device"})),
      op_seconds_(registry_.Histogram("tensord_op_duration_seconds",
                                      "Time one op call of a batch took, by op and device.",
                                      {"op", "device"}, OpBuckets())),
      backward_passes_(registry_.Counter("tensord_backward_passes_total",
                                         "Backward passes that succeeded, by how they ran.",
                                         {"path"})),
      sessions_created_(
          registry_.Counter("tensord_sessions_created_total", "Sessions created since start.")),
      sessions_expired_(registry_.Counter("tensord_sessions_expired_total",
                                          "Sessions collected after their idle TTL.")) {
  const SessionManager* s = &sessions;
  registry_.Gauge("tensord_sessions", "Sessions open, by tenant.", {"tenant"}, [s] {
    std::vector<GaugeSample> out;
    for (const auto& [tenant, usage] : UsageByTenant(*s)) {
      out.push_back({{tenant}, static_cast<double>(usage.sessions)});
    }
    return out;
  });
  registry_.Gauge("tensord_tensors", "Tensor handles held by sessions, by device and tenant.",
                  {"device", "tenant"}, [s] {
                    std::vector<GaugeSample> out;
                    for (const auto& [tenant, usage] : UsageByTenant(*s)) {
                      for (const auto& [device, tb] : usage.by_device) {
                        out.push_back({{device, tenant}, static_cast<double>(tb.first)});
                      }
                    }
                    return out;
                  });
  registry_.Gauge("tensord_tensor_bytes",
                  "Bytes charged to sessions' quotas (tensors, tapes), by device and tenant.",
                  {"device", "tenant"}, [s] {
                    std::vector<GaugeSample> out;
                    for (const auto& [tenant, usage] : UsageByTenant(*s)) {
                      for (const auto& [device, tb] : usage.by_device) {
                        out.push_back({{device, tenant}, static_cast<double>(tb.second)});
                      }
                    }
                    return out;
                  });
  registry_.Gauge("tensord_device_memory_bytes",
                  "Bytes of tensors on each device, summed over sessions.", {"device"}, [s] {
                    std::map<std::string, int64_t> by_device;
                    for (const SessionUsage& u : s->Usage()) by_device[u.device] += u.bytes;
                    std::vector<GaugeSample> out;
                    for (const auto& [device, bytes] : by_device) {
                      out.push_back({{device}, static_cast<double>(bytes)});
                    }
                    if (out.empty()) out.push_back({{kHostDevice}, 0});
                    return out;
                  });
  registry_.Gauge("tensord_autodiff_contexts_open", "Autodiff contexts open in all sessions.", {},
                  [s] {
                    int64_t open = 0;
                    for (const SessionUsage& u : s->Usage()) open += u.open_contexts;
                    return std::vector<GaugeSample>{{{}, static_cast<double>(open)}};
                  });
  registry_.Gauge("tensord_host_memory_pool_bytes",
                  "Large host blocks the server has mapped: in use, or cached for reuse.",
                  {"state"}, [] {
                    const host_memory::Stats st = host_memory::GetStats();
                    return std::vector<GaugeSample>{
                        {{"cached"}, static_cast<double>(st.cached_bytes)},
                        {{"in_use"}, static_cast<double>(st.mapped_bytes - st.cached_bytes)}};
                  });
  registry_.Gauge("tensord_device_memory_cache_bytes",
                  "Accelerator memory the server holds from the drivers: in use, or cached for "
                  "reuse.",
                  {"state"}, [] {
                    const DeviceBlockCache::Stats st = DeviceBlockCache::TotalStats();
                    return std::vector<GaugeSample>{
                        {{"cached"}, static_cast<double>(st.cached_bytes)},
                        {{"in_use"}, static_cast<double>(st.held_bytes - st.cached_bytes)}};
                  });
  registry_.Gauge("tensord_plugin_ops", "Ops added by custom-op plugins.", {}, [plugin_ops] {
    return std::vector<GaugeSample>{{{}, static_cast<double>(plugin_ops)}};
  });
  registry_.Gauge("tensord_build_info", "Versions this server was built with (value 1).",
                  {"version", "grpc_version", "onednn_version"}, [] {
                    return std::vector<GaugeSample>{
                        {{TENSORD_VERSION_STRING, grpc::Version(), OneDnnVersion()}, 1}};
                  });
  registry_.Gauge("process_resident_memory_bytes", "Resident memory size in bytes.", {}, [] {
    return std::vector<GaugeSample>{{{}, ResidentBytes()}};
  });
  const double start = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  registry_.Gauge("process_start_time_seconds", "Start time of the process since the Unix epoch.",
                  {}, [start] {
                    return std::vector<GaugeSample>{{{}, start}};
                  });
  registry_.Gauge(
      "process_cpu_seconds_total", "User and system CPU time spent, in seconds.", {},
      [] {
        return std::vector<GaugeSample>{{{}, CpuSeconds()}};
      },
      "counter");
}

void ServiceMetrics::RecordRpc(absl::string_view method, absl::string_view code,
                               absl::string_view reason, absl::Duration duration, int64_t bytes_in,
                               int64_t bytes_out) {
  rpcs_.Add({method, code});
  if (!reason.empty()) errors_.Add({method, reason});
  rpc_seconds_.Observe({method}, absl::ToDoubleSeconds(duration));
  if (bytes_in > 0) received_bytes_.Add({method}, static_cast<double>(bytes_in));
  if (bytes_out > 0) sent_bytes_.Add({method}, static_cast<double>(bytes_out));
}

void ServiceMetrics::RecordOps(const OpTimings& timings, const std::string& device) {
  for (const auto& [op, seconds] : timings.seconds_) {
    op_calls_.Add({op, device}, static_cast<double>(seconds.size()));
    op_seconds_.ObserveAll({op, device}, seconds);
  }
}

void ServiceMetrics::RecordBackward(absl::string_view path) { backward_passes_.Add({path}); }
void ServiceMetrics::RecordSessionCreated() { sessions_created_.Add({}); }
void ServiceMetrics::RecordSessionExpired(int64_t sessions) {
  sessions_expired_.Add({}, static_cast<double>(sessions));
}

}  // namespace tensord
