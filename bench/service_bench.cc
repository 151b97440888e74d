// Service overhead benchmark. Prints three figures measured in one run, each as a ratio to a
// baseline that does the same transport or compute work without tensord:
//   1. a small op through Execute vs a bare unary echo on the same channel;
//   2. a 2048x2048 f32 matmul on server-resident tensors vs oneDNN called in-process;
//   3. put+get of 256 MiB vs the same bytes through a bare gRPC stream, and through a shared
//      memory region vs the streams;
//   4. two sessions' batches sent side by side vs one session's alone (throughput).
// Usage: service_bench [--quick] [--only small_op|matmul|transfer|two_sessions]...
//                      [--server HOST:PORT]
//   (--quick shrinks sizes and repetitions for CI smoke runs; --only runs the lines named;
//   --server sends the two sessions' batches to a tensord running in another process, so that
//   the bench's own threads do not share the server's allocator and gRPC runtime)
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "bench_timing.h"
#include "client/cpp/internal.h"
#include "client/cpp/tensord.h"
#include "dnnl.hpp"
#include "echo_service.h"
#include "server/service/server.h"
#include "server/service/server_log.h"
#include "tensord/v1/service.grpc.pb.h"

namespace {

using Clock = tensord::bench::Clock;
namespace tc = tensord::client;

using tensord::bench::InterleavedMedianSeconds;
using tensord::bench::MedianSeconds;
using tensord::bench::Seconds;

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "service_bench: %s: %s\n", what, std::string(s.message()).c_str());
    std::exit(1);
  }
}
void Check(const grpc::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "service_bench: %s: %s\n", what, s.error_message().c_str());
    std::exit(1);
  }
}

tc::HostTensor RandomMatrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(rows * cols);
  for (float& x : v) x = dist(gen);
  return tc::HostTensor(v, {rows, cols});
}

void SmallOp(const std::shared_ptr<grpc::Channel>& channel, const std::string& session, int reps) {
  auto stub = tensord::v1::Tensord::NewStub(channel);
  auto echo = tensord::bench::Echo::NewStub(channel);
  // add of two [4] f32 literals, result fetched inline: one round trip doing real op work.
  tensord::v1::ExecuteRequest req;
  req.set_session_id(session);
  auto* call = req.add_calls();
  call->set_op("add");
  call->set_fetch(true);
  for (int i = 0; i < 2; ++i) {
    auto* lit = call->add_inputs()->mutable_literal();
    lit->set_dtype(tensord::v1::DTYPE_F32);
    lit->add_shape(4);
    lit->set_data(std::string(16, '\0'));
  }
  tensord::v1::ReleaseRequest release;
  release.set_session_id(session);
  tensord::bench::Blob blob;
  blob.set_data(std::string(32, '\0'));
  // Call by call alternately, so that the machine's drift reaches both medians alike.
  const auto [op, bare] = InterleavedMedianSeconds(
      50, reps,
      [&] {
        grpc::ClientContext ctx;
        tensord::v1::ExecuteResponse resp;
        Check(stub->Execute(&ctx, req, &resp), "Execute add");
        release.add_handles(resp.results(0).outputs(0).handle());
      },
      [&] {
        grpc::ClientContext ctx;
        tensord::bench::Blob out;
        Check(echo->Unary(&ctx, blob, &out), "Echo.Unary");
      });
  grpc::ClientContext ctx;
  tensord::v1::ReleaseResponse rr;
  Check(stub->Release(&ctx, release, &rr), "Release");
  std::printf(
      "small op (add [4] f32, fetched)   %8.1f us   bare unary echo %8.1f us   ratio %.2f\n",
      op * 1e6, bare * 1e6, op / bare);
}

void Matmul(tc::Session& session, int64_t n, int reps) {
  tc::Tensor a = session.Put(RandomMatrix(n, n, 1)).value();
  tc::Tensor b = session.Put(RandomMatrix(n, n, 2)).value();
  double served = MedianSeconds(1, reps, [&] {
    auto c = session.Op1("matmul", {a, b});
    Check(c.status(), "matmul");
  });

  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  dnnl::memory::desc md({n, n}, dt::f32, tag::ab);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md, md, md), eng);
  dnnl::matmul prim(pd);
  tc::HostTensor ha = RandomMatrix(n, n, 1), hb = RandomMatrix(n, n, 2);
  std::vector<float> hc(n * n);
  dnnl::memory ma(md, eng, const_cast<char*>(ha.bytes().data()));
  dnnl::memory mb(md, eng, const_cast<char*>(hb.bytes().data()));
  dnnl::memory mc(md, eng, hc.data());
  double direct = MedianSeconds(1, reps, [&] {
    prim.execute(strm, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
    strm.wait();
  });
  const double flops = 2.0 * n * n * n;
  std::printf(
      "matmul %ldx%ld f32 (resident)     %8.2f ms (%5.1f GFLOP/s)   oneDNN in-process %8.2f ms "
      "(%5.1f GFLOP/s)   ratio %.3f\n",
      static_cast<long>(n), static_cast<long>(n), served * 1e3, flops / served * 1e-9, direct * 1e3,
      flops / direct * 1e-9, served / direct);
}

void Transfer(const std::shared_ptr<grpc::Channel>& channel, tc::Session& session, int64_t bytes,
              int reps) {
  const int64_t n = bytes / 4;
  std::vector<float> values(n, 1.5f);
  tc::HostTensor host(values, {n});
  double tensord_s = MedianSeconds(0, reps, [&] {
    auto t = session.Put(host);
    Check(t.status(), "Put");
    auto back = t->ToHost();
    Check(back.status(), "Get");
    if (back->bytes().size() != host.bytes().size()) std::exit(2);
  });

  auto echo = tensord::bench::Echo::NewStub(channel);
  const uint32_t chunk = 1u << 20;
  double bare_s = MedianSeconds(0, reps, [&] {
    {
      grpc::ClientContext ctx;
      tensord::bench::Count count;
      auto writer = echo->Upload(&ctx, &count);
      tensord::bench::Blob blob;
      for (int64_t off = 0; off < bytes; off += chunk) {
        blob.mutable_data()->assign(host.bytes().data() + off,
                                    std::min<int64_t>(chunk, bytes - off));
        writer->Write(blob);
      }
      writer->WritesDone();
      Check(writer->Finish(), "Echo.Upload");
    }
    grpc::ClientContext ctx;
    tensord::bench::Count req;
    req.set_bytes(bytes);
    req.set_chunk_bytes(chunk);
    auto reader = echo->Download(&ctx, req);
    tensord::bench::Blob blob;
    std::string received;
    // The buffer the client gives a received tensor (huge pages when large), so that both
    // sides pay the same page faults.
    tc::internal::ReserveTensorBytes(received, static_cast<size_t>(bytes));
    while (reader->Read(&blob)) received.append(blob.data());
    Check(reader->Finish(), "Echo.Download");
  });
  const double mib = static_cast<double>(bytes) / (1 << 20);
  std::printf(
      "put+get %4.0f MiB                   %8.1f ms (%6.0f MiB/s)   bare gRPC stream %8.1f ms "
      "(%6.0f MiB/s)   ratio %.2f\n",
      mib, tensord_s * 1e3, 2 * mib / tensord_s, bare_s * 1e3, 2 * mib / bare_s,
      tensord_s / bare_s);

  // The same bytes through a shared memory region: HostTensor copied in, put, got, copied out.
  auto shm = tc::SharedMemory::Create(session, static_cast<uint64_t>(bytes));
  Check(shm.status(), "SharedMemory::Create");
  double shm_s = MedianSeconds(0, reps, [&] {
    auto t = shm->Put(host);
    Check(t.status(), "SharedMemory::Put");
    auto back = shm->Get(*t);
    Check(back.status(), "SharedMemory::Get");
    if (back->bytes().size() != host.bytes().size()) std::exit(2);
  });
  std::printf(
      "shm put+get %4.0f MiB               %8.1f ms (%6.0f MiB/s)   tensord streams  %8.1f ms "
      "(%6.0f MiB/s)   %.1fx the streams\n",
      mib, shm_s * 1e3, 2 * mib / shm_s, tensord_s * 1e3, 2 * mib / tensord_s, tensord_s / shm_s);

  // In place: the bytes are written into and read from the region by the caller, so no fresh
  // client buffer is faulted in for each get (most of the copying line's time on a VM).
  double in_place_s = MedianSeconds(0, reps, [&] {
    auto t = shm->PutAt(tc::DType::kF32, {n});
    Check(t.status(), "SharedMemory::PutAt");
    Check(shm->GetAt(*t), "SharedMemory::GetAt");
  });
  std::printf(
      "shm in place put+get %4.0f MiB      %8.1f ms (%6.0f MiB/s)   tensord streams  %8.1f ms "
      "(%6.0f MiB/s)   %.1fx the streams\n",
      mib, in_place_s * 1e3, 2 * mib / in_place_s, tensord_s * 1e3, 2 * mib / tensord_s,
      tensord_s / in_place_s);
}

// One client of TwoSessions: its own channel (its own connection, as a separate client process
// would have), its own session, and a batch of n chained adds of [4] f32 built once.
struct BatchSender {
  std::unique_ptr<tensord::v1::Tensord::Stub> stub;
  tensord::v1::ExecuteRequest batch;
  std::string session;

  BatchSender(const std::string& target, int index, int n) {
    grpc::ChannelArguments args;
    args.SetInt("tensord.bench.sender", index);  // distinct args: no shared subchannel
    stub = tensord::v1::Tensord::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
    grpc::ClientContext ctx;
    tensord::v1::CreateSessionRequest req;
    tensord::v1::CreateSessionResponse resp;
    Check(stub->CreateSession(&ctx, req, &resp), "CreateSession");
    session = resp.session_id();
    batch.set_session_id(session);
    for (int k = 0; k < n; ++k) {
      auto* call = batch.add_calls();
      call->set_op("add");
      if (k == 0) {
        auto* lit = call->add_inputs()->mutable_literal();
        lit->set_dtype(tensord::v1::DTYPE_F32);
        lit->add_shape(4);
        lit->set_data(std::string(16, '\0'));
      } else {
        call->add_inputs()->mutable_call_output()->set_call(k - 1);
      }
      call->add_inputs()->mutable_scalar()->set_f(1.0);
    }
  }

  // Sends the batch `times` times, releasing its outputs after each, as a client would.
  void Send(int times) {
    for (int i = 0; i < times; ++i) {
      grpc::ClientContext ctx;
      tensord::v1::ExecuteResponse resp;
      Check(stub->Execute(&ctx, batch, &resp), "Execute batch");
      tensord::v1::ReleaseRequest release;
      release.set_session_id(session);
      for (const auto& r : resp.results())
        for (const auto& o : r.outputs()) release.add_handles(o.handle());
      grpc::ClientContext rctx;
      tensord::v1::ReleaseResponse rr;
      Check(stub->Release(&rctx, release, &rr), "Release");
    }
  }
};

// CPU seconds this process (client and server) has used.
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Two sessions' batches side by side against one session's alone, rounds interleaved: with no
// lock that one session's batch holds against the other, two sessions on two cores move close
// to twice the ops of one (the client's own threads share those cores).
void TwoSessions(const std::string& target, int n, int batches, int rounds, const char* busy) {
  BatchSender first(target, 0, n), second(target, 1, n);
  first.Send(2);
  second.Send(2);
  std::vector<double> alone, together;
  double cpu_alone = 0, cpu_together = 0;  // cores busy: CPU seconds over wall seconds
  for (int r = 0; r < rounds; ++r) {
    double cpu = ProcessCpuSeconds();
    auto a = Clock::now();
    first.Send(batches);
    alone.push_back(Seconds(a, Clock::now()));
    cpu_alone += (ProcessCpuSeconds() - cpu) / alone.back() / rounds;
    cpu = ProcessCpuSeconds();
    a = Clock::now();
    std::thread other([&] { second.Send(batches); });
    first.Send(batches);
    other.join();
    together.push_back(Seconds(a, Clock::now()));
    cpu_together += (ProcessCpuSeconds() - cpu) / together.back() / rounds;
  }
  std::sort(alone.begin(), alone.end());
  std::sort(together.begin(), together.end());
  const double one = alone[alone.size() / 2], two = together[together.size() / 2];
  const double ops = static_cast<double>(n) * batches;
  std::printf(
      "two sessions, batches of %d adds   %8.0f k ops/s   one session %8.0f k ops/s   ratio %.2f "
      "(goal >= 1.7 on 2 cores); cores busy (%s) %.2f together, %.2f alone\n",
      n, 2 * ops / two * 1e-3, ops / one * 1e-3, 2 * one / two, busy, cpu_together, cpu_alone);
}

}  // namespace

int main(int argc, char** argv) {
  // As the server binary does (server/main.cc): abseil as Debian builds it checks the order of
  // every lock taken, which the released server switches off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  bool quick = false;
  std::vector<std::string> only;
  std::string external;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only.push_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--server") == 0 && i + 1 < argc) {
      external = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: service_bench [--quick] [--only small_op|matmul|transfer|two_sessions] "
                   "[--server HOST:PORT]\n");
      return 2;
    }
  }
  auto runs = [&](const char* line) {
    return only.empty() || std::find(only.begin(), only.end(), line) != only.end();
  };
  tensord::bench::EchoService echo;
  tensord::ServerOptions options;
  options.address = "127.0.0.1:0";
  options.extra_services.push_back(&echo);
  options.shared_memory = true;
  options.shared_memory_key_prefix = "/tensord-";
  // A deployed server logs a line per RPC (info); the figures include that cost, and the lines
  // go to /dev/null instead of the bench's output.
  std::FILE* log_sink = std::fopen("/dev/null", "w");
  if (log_sink != nullptr) tensord::DefaultLog().set_output(log_sink);
  auto server = tensord::TensordServer::Start(options);
  Check(server.status(), "start server");
  const std::string target = "127.0.0.1:" + std::to_string((*server)->port());

  auto client = tc::Client::Connect(target).value();
  auto session = client.CreateSession().value();
  std::printf("tensord service_bench (%s run, one process, loopback)\n", quick ? "quick" : "full");
  if (runs("small_op")) SmallOp(client.channel(), session.id(), quick ? 200 : 2000);
  if (runs("matmul")) Matmul(session, quick ? 512 : 2048, quick ? 3 : 10);
  if (runs("transfer")) {
    Transfer(client.channel(), session, quick ? (int64_t{16} << 20) : (int64_t{256} << 20),
             quick ? 2 : 5);
  }
  if (runs("two_sessions")) {
    TwoSessions(external.empty() ? target : external, 1000, quick ? 3 : 20, quick ? 2 : 5,
                external.empty() ? "client and server" : "client only");
  }
  return 0;
}
