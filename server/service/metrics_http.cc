#include "server/service/metrics_http.h"

#include <httplib.h>

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tensord {
namespace {

constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, std::function<std::string()> render) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics: the metrics address must be host:port (e.g. 0.0.0.0:9464), got '", address, "'"));
  }
  std::string host = address.substr(0, colon);
  // "[::]:9464" names an IPv6 host in brackets, as gRPC addresses do.
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->http_ = std::make_unique<httplib::Server>();
  httplib::Server& http = *server->http_;
  // Scrapes are rare and cheap; two threads serve them (httplib's default is one per core).
  http.new_task_queue = [] { return new httplib::ThreadPool(2); };
  http.Get("/metrics", [render](const httplib::Request&, httplib::Response& res) {
    res.set_content(render(), kContentType);
  });
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("tensord metrics: GET /metrics\n", "text/plain");
  });
  const int bound =
      port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    return absl::UnavailableError(absl::StrCat("metrics: cannot listen on ", address,
                                               " (address in use, or not a local address)"));
  }
  server->port_ = bound;
  server->thread_ = std::thread([&http] { http.listen_after_bind(); });
  // httplib's stop() does nothing before the accept loop runs, so a Stop right after Start
  // would leave the thread serving; wait until it does.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!http.is_running() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  if (!http.is_running()) {
    server->thread_.join();  // listen_after_bind returned without serving
    return absl::UnavailableError(absl::StrCat("metrics: cannot serve on ", address));
  }
  return server;
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (http_ != nullptr) http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tensord
