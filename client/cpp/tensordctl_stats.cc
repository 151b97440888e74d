// tensordctl stats: what a running server holds and does, read from its Prometheus /metrics
// endpoint. Two scrapes some seconds apart give the rates; the gauges come from the second.
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/cpp/tensordctl_commands.h"
#include "client/cpp/tensordctl_prometheus.h"
#include "client/cpp/tensordctl_stats_report.h"

namespace tensordctl {
namespace {

using Clock = std::chrono::steady_clock;

// An exposition is a few hundred KiB at most (bounded label sets); more is not tensord.
constexpr size_t kMaxBodyBytes = size_t{64} << 20;
constexpr double kDefaultTimeoutSeconds = 5;

struct Endpoint {
  std::string host;
  int port = 0;
  std::string url;  // how messages name it
};

// "HOST:PORT", "[V6]:PORT", each optionally after "http://" (as a browser would be given it).
absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view address) {
  absl::ConsumePrefix(&address, "http://");
  absl::ConsumeSuffix(&address, "/metrics");
  const size_t colon = address.rfind(':');
  Endpoint out;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &out.port) || out.port <= 0 ||
      out.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("the metrics address must be HOST:PORT (tensord's --metrics-address), got '",
                     address, "'"));
  }
  out.host = std::string(address.substr(0, colon));
  out.url = absl::StrCat("http://", address, "/metrics");
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  return out;
}

std::string DescribeHttpError(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
      return "cannot connect (nothing listening there, or unreachable)";
    case httplib::Error::ConnectionTimeout:
      return "timed out connecting";
    case httplib::Error::Read:
      return "no HTTP answer (the connection closed or timed out)";
    case httplib::Error::Write:
      return "the request could not be sent";
    default:
      return absl::StrCat("HTTP error ", httplib::to_string(error));
  }
}

absl::StatusOr<Scrape> ScrapeOnce(const Endpoint& endpoint, double timeout_s) {
  httplib::Client http(endpoint.host, endpoint.port);
  const auto timeout = std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  http.set_connection_timeout(timeout);
  http.set_read_timeout(timeout);
  http.set_write_timeout(timeout);
  std::string body;
  const Clock::time_point sent = Clock::now();
  // The timeouts above bound each read; this bounds the whole answer, which a server sending
  // a byte at a time would otherwise stretch without end.
  const Clock::time_point deadline = sent + timeout;
  std::string refused;
  httplib::Result result = http.Get("/metrics", [&](const char* data, size_t n) {
    body.append(data, n);
    if (body.size() > kMaxBodyBytes) {
      refused = absl::StrCat("the answer is larger than ", kMaxBodyBytes >> 20, " MiB");
    } else if (Clock::now() > deadline) {
      refused = absl::StrCat("the answer took longer than ", timeout_s, " s");
    }
    return refused.empty();
  });
  const Clock::time_point answered = Clock::now();
  if (!result) {
    return absl::UnavailableError(
        absl::StrCat("cannot scrape ", endpoint.url, ": ",
                     refused.empty() ? DescribeHttpError(result.error()) : refused));
  }
  if (result->status != 200) {
    return absl::FailedPreconditionError(
        absl::StrCat(endpoint.url, " answered HTTP ", result->status, ", not tensord's metrics"));
  }
  absl::StatusOr<std::vector<MetricSample>> samples = ParsePrometheusText(body);
  if (!samples.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        endpoint.url, " does not serve Prometheus metrics (", samples.status().message(), ")"));
  }
  Scrape scrape;
  scrape.samples = *std::move(samples);
  // Every tensord exposes its build info; another program's metrics would be misread.
  if (FindSample(scrape, "tensord_build_info") == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(endpoint.url, " serves metrics, but not tensord's (no tensord_build_info)"));
  }
  // The server rendered the page somewhere between the request and the answer.
  scrape.at_seconds =
      std::chrono::duration<double>(sent.time_since_epoch() + (answered - sent) / 2).count();
  scrape.unix_seconds =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return scrape;
}

void SleepSeconds(double seconds) {
  std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)));
}

}  // namespace

int Stats(const Args& args, double timeout_s) {
  if (!args.positional.empty()) return Usage("stats takes no positional arguments");
  std::string address;
  if (const char* env = std::getenv("TENSORD_METRICS_ADDRESS"); env != nullptr) address = env;
  if (const std::string* m = args.Flag("metrics")) address = *m;
  if (address.empty()) {
    return Usage("stats needs --metrics HOST:PORT (or $TENSORD_METRICS_ADDRESS)");
  }
  double interval_s = 1;
  if (const std::string* s = args.Flag("interval");
      s && (!absl::SimpleAtod(*s, &interval_s) || !(interval_s > 0) || interval_s > 3600)) {
    return Usage("--interval takes seconds (more than 0, at most 3600)");
  }
  absl::StatusOr<Endpoint> endpoint = ParseEndpoint(address);
  if (!endpoint.ok()) return Usage(std::string(endpoint.status().message()));
  if (!(timeout_s > 0)) timeout_s = kDefaultTimeoutSeconds;
  const bool watch = args.Flag("watch") != nullptr;
  // Like top: a terminal shows one report at a time, a pipe gets them one after another.
  const bool redraw = watch && isatty(STDOUT_FILENO) == 1;

  absl::StatusOr<Scrape> before = ScrapeOnce(*endpoint, timeout_s);
  if (!before.ok()) return Fail(before.status());
  for (bool first = true;; first = false) {
    SleepSeconds(interval_s);
    absl::StatusOr<Scrape> after = ScrapeOnce(*endpoint, timeout_s);
    if (!after.ok()) return Fail(after.status());
    const std::string report = RenderStats(*before, *after, endpoint->url);
    if (redraw) {
      std::fputs("\x1b[H\x1b[2J", stdout);
    } else if (!first) {
      std::fputc('\n', stdout);
    }
    std::fputs(report.c_str(), stdout);
    std::fflush(stdout);
    if (!watch) return 0;
    before = std::move(after);
  }
}

}  // namespace tensordctl
