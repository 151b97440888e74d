// Load / soak driver: N concurrent clients, each looping a whole training-step life cycle
// (open a session, put tensors, run a forward batch, backward, fetch, a no_grad update, close)
// for T seconds against one server. Reports calls/s, call latency percentiles, errors, and the
// server's resident memory before, at peak and after every session closed.
// Exits non-zero on any failed call, or when the server's RSS does not come back near its
// baseline after the load (a leak, or memory held on to), or when a spawned server does not
// exit cleanly on SIGTERM.
//
//   load --tensord build/tensord [--clients 32] [--seconds 20]   spawn a server and load it
//   load --target 127.0.0.1:50051 --pid 1234 ...                  load a running server
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/load_server.h"
#include "client/cpp/tensord.h"

namespace tc = tensord::client;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string target;
  std::string tensord;  // spawn this server binary when set
  int pid = 0;
  int clients = 32;
  double seconds = 20;
  // Big enough that 32 sessions take a few hundred MiB at the peak: memory a closed session
  // does not give back then shows against the RSS limit.
  int batch = 256, dim = 512, hidden = 1024, classes = 10;
  // After the load the server's RSS must come back to baseline + max(slack_mib, slack_pct %).
  double rss_slack_mib = 0, rss_slack_pct = 10;
  double settle_seconds = 10;
};

constexpr char kUsage[] = R"(usage: load (--tensord PATH | --target ADDR [--pid PID]) [options]
  --clients N          concurrent clients (default 32)
  --seconds T          load duration (default 20)
  --batch B --dim D --hidden H --classes C   model sizes (default 256 512 1024 10)
  --rss-slack-mib M --rss-slack-pct P        allowed RSS above baseline after the load
                                             (default max(0 MiB, 10 %))
  --settle-seconds S   how long to wait for RSS to come back (default 10)
)";

bool ParseFlags(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    bool ok = true;
    if (flag == "--target") {
      o->target = v;
    } else if (flag == "--tensord") {
      o->tensord = v;
    } else if (flag == "--pid") {
      ok = absl::SimpleAtoi(v, &o->pid);
    } else if (flag == "--clients") {
      ok = absl::SimpleAtoi(v, &o->clients) && o->clients > 0;
    } else if (flag == "--seconds") {
      ok = absl::SimpleAtod(v, &o->seconds) && o->seconds > 0;
    } else if (flag == "--batch") {
      ok = absl::SimpleAtoi(v, &o->batch) && o->batch > 0;
    } else if (flag == "--dim") {
      ok = absl::SimpleAtoi(v, &o->dim) && o->dim > 0;
    } else if (flag == "--hidden") {
      ok = absl::SimpleAtoi(v, &o->hidden) && o->hidden > 0;
    } else if (flag == "--classes") {
      ok = absl::SimpleAtoi(v, &o->classes) && o->classes > 1;
    } else if (flag == "--rss-slack-mib") {
      ok = absl::SimpleAtod(v, &o->rss_slack_mib);
    } else if (flag == "--rss-slack-pct") {
      ok = absl::SimpleAtod(v, &o->rss_slack_pct);
    } else if (flag == "--settle-seconds") {
      ok = absl::SimpleAtod(v, &o->settle_seconds);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "load: bad flag %s %s\n", flag.c_str(), v.c_str());
      return false;
    }
  }
  return !o->target.empty() || !o->tensord.empty();
}

// What one client thread measured.
struct ClientStats {
  std::vector<double> latency_us;  // one entry per RPC-level call
  int64_t loops = 0;
  int64_t errors = 0;
};

std::mutex error_mu;
int64_t errors_printed = 0;

void ReportError(int client, const char* what, const absl::Status& status) {
  std::lock_guard<std::mutex> lock(error_mu);
  if (errors_printed++ < 10) {
    std::fprintf(stderr, "load: client %d: %s failed: %s\n", client, what,
                 status.ToString().c_str());
  }
}

std::vector<float> RandomFloats(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// One life cycle; false at the first failed call (the session object closes what is left).
bool OneLoop(const tc::Client& client, const Options& o, int id, std::mt19937& rng,
             ClientStats* stats) {
  auto timed = [&](const char* what, auto&& call) -> bool {
    const auto start = Clock::now();
    const absl::Status status = call();
    stats->latency_us.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    if (!status.ok()) {
      ReportError(id, what, status);
      return false;
    }
    return true;
  };

  absl::StatusOr<tc::Session> session;
  if (!timed("CreateSession", [&] {
        session = client.CreateSession();
        return session.status();
      }))
    return false;
  absl::StatusOr<tc::AutodiffContext> ctx;
  if (!timed("OpenAutodiffContext", [&] {
        ctx = session->OpenAutodiff();
        return ctx.status();
      }))
    return false;

  std::vector<int64_t> labels(o.batch);
  for (int64_t& l : labels) l = std::uniform_int_distribution<int64_t>(0, o.classes - 1)(rng);
  const float he1 = std::sqrt(2.0f / o.dim), he2 = std::sqrt(2.0f / o.hidden);
  struct PutArgs {
    const char* name;
    tc::HostTensor value;
    bool grad;
  };
  std::vector<PutArgs> puts = {
      {"Put x", tc::HostTensor(RandomFloats(rng, size_t(o.batch) * o.dim, 1.0f), {o.batch, o.dim}),
       false},
      {"Put y", tc::HostTensor(labels), false},
      {"Put w1",
       tc::HostTensor(RandomFloats(rng, size_t(o.dim) * o.hidden, he1), {o.dim, o.hidden}), true},
      {"Put b1", tc::HostTensor(std::vector<float>(o.hidden, 0.0f)), true},
      {"Put w2",
       tc::HostTensor(RandomFloats(rng, size_t(o.hidden) * o.classes, he2), {o.hidden, o.classes}),
       true},
  };
  std::vector<tc::Tensor> t;
  for (const PutArgs& p : puts) {
    absl::StatusOr<tc::Tensor> put;
    if (!timed(p.name, [&] {
          put = session->Put(p.value, {p.grad, ctx->id()});
          return put.status();
        })) {
      return false;
    }
    t.push_back(*put);
  }
  const tc::Tensor &x = t[0], &y = t[1], &w1 = t[2], &b1 = t[3], &w2 = t[4];

  // The forward pass as one atomic batch: one round trip for five ops.
  tc::Batch forward = session->NewBatch({/*no_grad=*/false, ctx->id()});
  tc::CallRef h = forward.Add("relu", {forward.Add("add", {forward.Add("matmul", {x, w1}), b1})});
  tc::CallRef logits = forward.Add("matmul", {h, w2});
  tc::CallRef loss = forward.Add("cross_entropy", {logits, y}, {}, {false, /*fetch=*/true});
  absl::StatusOr<tc::BatchResult> fwd;
  if (!timed("Execute forward", [&] {
        fwd = forward.Run();
        return fwd.status();
      }))
    return false;

  absl::StatusOr<tc::Gradients> grads;
  if (!timed("Backward", [&] {
        grads = ctx->Backward({fwd->output(loss)});
        return grads.status();
      }))
    return false;
  absl::StatusOr<tc::HostTensor> g1, out;
  if (!timed("Get grad", [&] {
        g1 = session->Get(grads->grad(w1));
        return g1.status();
      }))
    return false;
  if (!timed("Get logits", [&] {
        out = session->Get(fwd->output(logits));
        return out.status();
      }))
    return false;

  tc::Batch update = session->NewBatch({/*no_grad=*/true});
  for (const tc::Tensor* p : {&w1, &b1, &w2}) {
    update.Add("assign", {*p, update.Add("sub", {*p, update.Add("mul", {grads->grad(*p), 0.1})})});
  }
  if (!timed("Execute update", [&] { return update.Run().status(); })) return false;
  if (!timed("CloseAutodiffContext", [&] { return ctx->Close(); })) return false;
  if (!timed("CloseSession", [&] { return session->Close(); })) return false;
  return true;
}

void ClientLoop(const Options& o, int id, Clock::time_point end, ClientStats* stats) {
  std::mt19937 rng(1000 + id);
  absl::StatusOr<tc::Client> client = tc::Client::Connect(o.target);
  if (!client.ok()) {
    ReportError(id, "Connect", client.status());
    ++stats->errors;
    return;
  }
  while (Clock::now() < end) {
    if (!OneLoop(*client, o, id, rng, stats)) ++stats->errors;
    ++stats->loops;
  }
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * (sorted.size() - 1) + 0.5));
  return sorted[i];
}

double Mib(int64_t kib) { return kib / 1024.0; }

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseFlags(argc, argv, &o)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::unique_ptr<tensord::bench::SpawnedServer> spawned;
  if (!o.tensord.empty()) {
    absl::StatusOr<std::unique_ptr<tensord::bench::SpawnedServer>> s =
        tensord::bench::SpawnedServer::Start(o.tensord);
    if (!s.ok()) {
      std::fprintf(stderr, "load: %s\n", s.status().ToString().c_str());
      return 1;
    }
    spawned = *std::move(s);
    o.target = spawned->target();
    o.pid = spawned->pid();
  }
  tensord::bench::RssSampler rss(o.pid);
  std::printf("load: %d clients for %.0f s against %s (server pid %d)\n", o.clients, o.seconds,
              o.target.c_str(), o.pid);
  const int64_t start_kib = rss.Now();

  // One warm-up life cycle: the op catalog, gRPC's buffers and oneDNN's kernels for these
  // shapes exist from then on, and belong to the baseline rather than to the load.
  {
    ClientStats warm;
    absl::StatusOr<tc::Client> client = tc::Client::Connect(o.target);
    std::mt19937 rng(1);
    if (!client.ok() || !OneLoop(*client, o, -1, rng, &warm)) {
      std::fprintf(stderr, "load: the warm-up loop failed\n");
      return 1;
    }
  }
  // The server keeps freed tensor blocks for a second for reuse, then hands them back; the
  // baseline is the idle server after that, as the load is measured after it too.
  if (o.pid) std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  const int64_t baseline_kib = rss.Now();
  rss.StartPeakTracking();

  std::vector<ClientStats> stats(o.clients);
  std::vector<std::thread> threads;
  const auto begin = Clock::now();
  const auto end =
      begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  for (int i = 0; i < o.clients; ++i) {
    threads.emplace_back(ClientLoop, std::cref(o), i, end, &stats[i]);
  }
  for (std::thread& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  const int64_t peak_kib = rss.StopPeakTracking();

  // Every session is closed now; give the server a moment to return memory.
  const int64_t limit_kib =
      baseline_kib + std::max<int64_t>(static_cast<int64_t>(o.rss_slack_mib * 1024),
                                       static_cast<int64_t>(baseline_kib * o.rss_slack_pct / 100));
  // The reaper hands freed pages back once per reap interval (1 s by default): measure after two.
  if (o.pid) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(static_cast<int64_t>(1000 * std::min(2.0, o.settle_seconds))));
  }
  int64_t after_kib = rss.Now();
  const auto settle_end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(o.settle_seconds));
  while (o.pid && after_kib > limit_kib && Clock::now() < settle_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    after_kib = rss.Now();
  }

  std::vector<double> all;
  int64_t loops = 0, errors = 0;
  for (const ClientStats& s : stats) {
    all.insert(all.end(), s.latency_us.begin(), s.latency_us.end());
    loops += s.loops;
    errors += s.errors;
  }
  std::sort(all.begin(), all.end());
  std::printf("calls        %zu in %.1f s = %.0f calls/s (%lld loops, %.1f loops/s)\n", all.size(),
              elapsed, all.size() / elapsed, static_cast<long long>(loops), loops / elapsed);
  std::printf("latency      p50 %.0f us  p99 %.0f us  max %.0f us\n", Percentile(all, 0.50),
              Percentile(all, 0.99), all.empty() ? 0.0 : all.back());
  std::printf("errors       %lld\n", static_cast<long long>(errors));
  bool ok = errors == 0;
  if (o.pid) {
    std::printf(
        "server RSS   start %.1f MiB, baseline %.1f MiB, peak %.1f MiB, after %.1f MiB "
        "(limit %.1f MiB)\n",
        Mib(start_kib), Mib(baseline_kib), Mib(peak_kib), Mib(after_kib), Mib(limit_kib));
    if (after_kib > limit_kib) {
      std::printf(
          "load: FAIL: server RSS stayed at %.1f MiB after every session closed, above "
          "baseline %.1f MiB + slack\n",
          Mib(after_kib), Mib(baseline_kib));
      ok = false;
    }
  }
  if (spawned) {
    absl::Status stopped = spawned->Stop();
    if (!stopped.ok()) {
      std::printf("load: FAIL: %s\n", stopped.ToString().c_str());
      ok = false;
    }
  }
  if (errors) std::printf("load: FAIL: %lld failed loops\n", static_cast<long long>(errors));
  std::printf("load: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
