// The Prometheus scrape endpoint: plain HTTP on its own address (--metrics-address), serving
// GET /metrics in the text exposition format. cpp-httplib does the HTTP; a separate port keeps
// scrapes off the gRPC port, whose TLS and tokens a Prometheus server would not speak.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace tensord {

class MetricsHttpServer {
 public:
  // Binds `address` ("host:port"; port 0 picks a free one) and serves `render()` at /metrics
  // from a thread of its own. INVALID_ARGUMENT for a malformed address, UNAVAILABLE when it
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& address, std::function<std::string()> render);
  ~MetricsHttpServer();  // Stop()
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }
  void Stop();

 private:
  MetricsHttpServer() = default;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace tensord
