// The tensord process killed (SIGKILL) in the middle of a streamed put, a long batch and a
// backward over a long graph, seen from the C++ client: the call fails with UNAVAILABLE within
// a bound and never hangs (the client has no call deadline that could hide a hang); a server
// restarted on the same address serves new sessions through the same Client, and the sessions
// from before are SESSION_NOT_FOUND. Work is sized from a measured call, so it lasts seconds
// on any machine.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cpp/tensord.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tensord/v1/service.grpc.pb.h"
#include "tests/support/tensord_process.h"

namespace tensord {
namespace {

namespace tc = ::tensord::client;
namespace v1 = ::tensord::v1;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using ::tensord::testing::TensordProcess;

// A killed server's clients see their connection reset at once (milliseconds here); the bound
// is generous for a loaded CI machine and still far from a hang.
constexpr auto kKillBound = std::chrono::seconds(10);

enum class Call { kPut, kBatch, kBackward };

// One call of `op` on `inputs`: the best of three, after a warm-up.
Clock::duration PerCall(tc::Session& s, const std::string& op, std::vector<tc::Operand> inputs) {
  Clock::duration best = Clock::duration::max();
  for (int k = 0; k < 4; ++k) {
    const Clock::time_point start = Clock::now();
    EXPECT_TRUE(s.Op1(op, inputs).ok());
    if (k > 0) best = std::min(best, Clock::now() - start);
  }
  return std::max<Clock::duration>(best, milliseconds(1));
}

// How many calls of `per_call` make `total`, within [lo, hi].
int Calls(Clock::duration total, Clock::duration per_call, int lo, int hi) {
  return static_cast<int>(std::clamp<int64_t>(total / per_call + 1, lo, hi));
}

tc::Tensor Zeros(tc::Session& s, std::initializer_list<int64_t> shape, uint64_t context = 0) {
  absl::StatusOr<tc::Tensor> t =
      s.Op1("zeros", {}, {{"shape", shape}}, {.requires_grad = context != 0, .context = context});
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : tc::Tensor();
}

class KillTest : public ::testing::TestWithParam<Call> {};

TEST_P(KillTest, CallFailsUnavailableAndARestartedServerServesNewSessions) {
  auto server = std::make_unique<TensordProcess>(std::vector<std::string>{});
  ASSERT_GT(server->port(), 0) << "tensord did not start (" << testing::TensordPath() << ")";
  const std::string address = absl::StrCat("127.0.0.1:", server->port());
  absl::StatusOr<tc::Client> client = tc::Client::Connect(address);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<tc::Session> session = client->CreateSession();
  ASSERT_TRUE(session.ok()) << session.status();

  std::function<absl::Status()> call;
  std::function<void()> under_way;
  std::atomic<bool> in_flight{false};
  // Declared here: the calls refer to them until they return.
  tc::Tensor a, b;
  std::unique_ptr<tc::AutodiffContext> ctx;
  absl::StatusOr<tc::BatchResult> chain;
  switch (GetParam()) {
    case Call::kPut:
      // 256 MiB with paced chunks: the stream lasts seconds, so the kill lands inside it
      // (the library's Put sends as fast as it can, which on loopback may finish first).
      call = [&] {
        std::unique_ptr<v1::Tensord::Stub> stub = v1::Tensord::NewStub(client->channel());
        grpc::ClientContext context;
        v1::PutTensorResponse response;
        auto writer = stub->PutTensor(&context, &response);
        v1::PutTensorRequest m;
        m.mutable_header()->set_session_id(session->id());
        m.mutable_header()->set_dtype(v1::DTYPE_F32);
        m.mutable_header()->add_shape(int64_t{64} << 20);
        writer->Write(m);
        m.set_chunk(std::string(1 << 20, '\0'));
        for (int k = 0; k < 256 && writer->Write(m); ++k) {
          if (k == 2) in_flight = true;
          std::this_thread::sleep_for(milliseconds(20));
        }
        writer->WritesDone();
        return tc::FromGrpcStatus(writer->Finish());
      };
      under_way = [&] {
        // The server charges the announced size when it has read the header.
        const Clock::time_point end = Clock::now() + kKillBound;
        for (;;) {
          absl::StatusOr<tc::SessionInfo> info = session->Info();
          if (in_flight && info.ok() && info->memory_used_bytes >= (uint64_t{256} << 20)) break;
          ASSERT_LT(Clock::now(), end) << "the put never reached the server";
          std::this_thread::sleep_for(milliseconds(10));
        }
      };
      break;
    case Call::kBatch:
      a = Zeros(*session, {256, 32768});
      b = Zeros(*session, {32768, 256});
      call = [&, calls = Calls(std::chrono::seconds(8), PerCall(*session, "matmul", {a, b}), 20,
                               5000)] {
        tc::Batch batch = session->NewBatch();  // about 8 s of matmuls with small outputs
        for (int k = 0; k < calls; ++k) batch.Add("matmul", {a, b});
        return batch.Run().status();
      };
      under_way = [] { std::this_thread::sleep_for(milliseconds(500)); };
      break;
    case Call::kBackward: {
      absl::StatusOr<tc::AutodiffContext> opened = session->OpenAutodiff();
      ASSERT_TRUE(opened.ok()) << opened.status();
      ctx = std::make_unique<tc::AutodiffContext>(std::move(*opened));
      a = Zeros(*session, {2048, 2048}, ctx->id());
      // A recorded chain y = y @ w of about a second; its backward runs two matmuls a node.
      const int nodes = Calls(std::chrono::seconds(1), PerCall(*session, "matmul", {a, a}), 4, 24);
      tc::Batch forward = session->NewBatch({.context = ctx->id()});
      tc::CallRef y = forward.Add("matmul", {a, a});
      for (int k = 1; k < nodes; ++k) y = forward.Add("matmul", {y, a});
      const tc::CallRef loss = forward.Add("sum", {y});
      const Clock::time_point start = Clock::now();
      chain = forward.Run();
      ASSERT_TRUE(chain.ok()) << chain.status();
      const Clock::duration forward_time = Clock::now() - start;
      call = [&, loss] { return ctx->Backward({chain->output(loss)}).status(); };
      under_way = [forward_time] {
        std::this_thread::sleep_for(std::max<Clock::duration>(milliseconds(200), forward_time / 2));
      };
      break;
    }
  }

  absl::Status status;
  std::atomic<bool> done{false};
  Clock::time_point returned;
  std::thread thread([&] {
    status = call();
    returned = Clock::now();
    done = true;
  });
  under_way();
  EXPECT_FALSE(done) << "the call ended before the server was killed: size it up";
  const Clock::time_point killed = Clock::now();
  server->Signal(SIGKILL);
  EXPECT_EQ(server->Wait(std::chrono::seconds(30)), -SIGKILL);
  while (!done && Clock::now() - killed < kKillBound) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(done) << "the call still hangs " << kKillBound.count() << " s after the kill";
  thread.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_LT(returned - killed, kKillBound);

  server.reset();
  server = std::make_unique<TensordProcess>(std::vector<std::string>{}, address);
  ASSERT_GT(server->port(), 0) << "tensord did not restart on " << address;
  // Calls made while the channel backs off from its failed reconnects are UNAVAILABLE.
  absl::StatusOr<tc::Session> fresh = client->CreateSession();
  for (const Clock::time_point end = Clock::now() + std::chrono::seconds(30);
       !fresh.ok() && fresh.status().code() == absl::StatusCode::kUnavailable &&
       Clock::now() < end;) {
    std::this_thread::sleep_for(milliseconds(100));
    fresh = client->CreateSession();
  }
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  absl::StatusOr<tc::Tensor> x = fresh->Put(tc::HostTensor(std::vector<float>{1, 2, 3}));
  ASSERT_TRUE(x.ok()) << x.status();
  absl::StatusOr<tc::HostTensor> back = fresh->Get(*x);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToDoubles(), (std::vector<double>{1, 2, 3}));
  // The restarted server knows nothing of the session from before.
  absl::Status old = session->Info().status();
  EXPECT_EQ(old.code(), absl::StatusCode::kNotFound) << old;
  EXPECT_EQ(tc::ReasonOf(old), v1::SESSION_NOT_FOUND) << old;
}

INSTANTIATE_TEST_SUITE_P(Calls, KillTest,
                         ::testing::Values(Call::kPut, Call::kBatch, Call::kBackward),
                         [](const ::testing::TestParamInfo<Call>& info) {
                           switch (info.param) {
                             case Call::kPut:
                               return std::string("Put");
                             case Call::kBatch:
                               return std::string("Batch");
                             case Call::kBackward:
                               return std::string("Backward");
                           }
                           return std::string();
                         });

}  // namespace
}  // namespace tensord
