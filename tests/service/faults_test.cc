// Faults: a cancelled or timed-out batch stops between calls and rolls back; a client that
// disconnects in the middle of a streamed put leaves nothing behind; a vanished client's
// session is collected at its TTL with all of its memory.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/core/status.h"
#include "server/ops/registry.h"
#include "server/service/execute.h"
#include "server/service/service_core.h"
#include "tests/service/service_env.h"
#include "tests/support/heap_bytes.h"

namespace tensord::service_test {
namespace {

using Clock = std::chrono::steady_clock;

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

using ::tensord::testing::HeapBytes;

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// ---- the batch itself, with a cancellation flag it checks between calls ----------------------

TEST(CancelledBatch, StopsBetweenCallsAndRollsBack) {
  Dispatcher dispatcher(OpRegistry::Builtin(), MakeBackends());
  Session session("s", SessionConfig{});
  absl::MutexLock lock(&session.mu());
  const std::vector<float> values = {1, 2, 3};
  absl::StatusOr<Tensor> x =
      dispatcher.FromHost(DType::kF32, {3}, "cpu", values.data(), 12, session.account());
  ASSERT_TRUE(x.ok()) << x.status();
  const uint64_t hx = session.Store(*x);
  const int64_t used = session.account()->used();

  BatchSpec batch;
  for (int k = 0; k < 5; ++k) {
    CallSpec call;
    call.op = k == 2 ? "assign" : "neg";
    call.inputs.push_back({OperandSpec::Handle{hx}});
    if (k == 2) call.inputs.push_back({OperandSpec::Scalar(0.0)});
    batch.calls.push_back(std::move(call));
  }
  // Cancelled as soon as the in-place write of call 2 has happened.
  const uint64_t version = x->storage()->version();
  auto cancelled = [&] { return x->storage()->version() != version; };
  absl::StatusOr<std::vector<CallOutcome>> r = ExecuteBatch(session, dispatcher, batch, cancelled);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(GetReason(r.status()), Reason::kCancelled);
  EXPECT_EQ(GetMetadata(r.status())["call_index"], "3");
  EXPECT_EQ(session.tensors().size(), 1u) << "no output of the batch was kept";
  EXPECT_EQ(session.account()->used(), used) << "their memory went back to the quota";
  EXPECT_EQ(session.Get(hx)->ToDoubles(), (std::vector<double>{1, 2, 3}))
      << "the assign of call 2 was undone";
}

// ---- through gRPC -------------------------------------------------------------------------

class FaultsTest : public ServiceTest {
 protected:
  uint64_t Used() {
    absl::StatusOr<tc::SessionInfo> info = session().Info();
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->memory_used_bytes : 0;
  }
  size_t Handles() {
    absl::StatusOr<tc::SessionInfo> info = session().Info();
    return info.ok() ? info->tensors.size() : 0;
  }
  // A batch of `calls` 512x512 matmuls, slow enough to be interrupted.
  v1::ExecuteRequest SlowBatch(uint64_t a, int calls) {
    v1::ExecuteRequest r;
    r.set_session_id(session().id());
    for (int k = 0; k < calls; ++k) {
      v1::OpCall* c = r.add_calls();
      c->set_op("matmul");
      c->add_inputs()->set_handle(a);
      c->add_inputs()->set_handle(a);
    }
    return r;
  }
};

TEST_F(FaultsTest, DeadlineStopsTheBatchAndRollsItBack) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor a,
                       session().Put(tc::HostTensor::Zeros(tc::DType::kF32, {512, 512})));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, session().Info());
  std::unique_ptr<v1::Tensord::Stub> stub = RawStub();
  // How long the whole batch takes here.
  const v1::ExecuteRequest batch = SlowBatch(a.handle(), 200);
  Clock::time_point start = Clock::now();
  {
    grpc::ClientContext context;
    v1::ExecuteResponse response;
    ASSERT_TRUE(stub->Execute(&context, batch, &response).ok());
    std::vector<uint64_t> outputs;
    for (const v1::CallResult& r : response.results()) outputs.push_back(r.outputs(0).handle());
    ASSERT_OK(session().Release(outputs));
  }
  const auto full = Clock::now() - start;

  for (bool deadline : {true, false}) {
    SCOPED_TRACE(deadline ? "deadline" : "client cancel");
    grpc::ClientContext context;
    if (deadline) context.set_deadline(std::chrono::system_clock::now() + full / 10);
    std::thread cancel;
    if (!deadline) {
      cancel = std::thread([&context, full] {
        std::this_thread::sleep_for(full / 10);
        context.TryCancel();
      });
    }
    start = Clock::now();
    v1::ExecuteResponse response;
    grpc::Status s = stub->Execute(&context, batch, &response);
    if (cancel.joinable()) cancel.join();
    EXPECT_EQ(s.error_code(),
              deadline ? grpc::StatusCode::DEADLINE_EXCEEDED : grpc::StatusCode::CANCELLED);
    // Info waits for the session lock, so it answers once the batch has stopped and rolled
    // back: well before the whole batch could have run.
    ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, session().Info());
    const auto stopped = Clock::now() - start;
    EXPECT_EQ(after, before);
    EXPECT_LT(stopped, full * 3 / 4) << "the batch ran on after the client gave up";
  }
}

TEST_F(FaultsTest, DeadlineStopsABackwardWhichKeepsItsGraph) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(
      tc::Tensor w,
      session().Put(tc::HostTensor::Zeros(tc::DType::kF32, {512, 512}), {true, ctx.id()}));
  // A long recorded chain: its backward runs two matmuls per node.
  std::unique_ptr<v1::Tensord::Stub> stub = RawStub();
  v1::ExecuteRequest chain;
  chain.set_session_id(session().id());
  chain.set_context_id(ctx.id());
  for (int k = 0; k < 100; ++k) {
    v1::OpCall* c = chain.add_calls();
    c->set_op("matmul");
    if (k == 0) {
      c->add_inputs()->set_handle(w.handle());
    } else {
      c->add_inputs()->mutable_call_output()->set_call(k - 1);
    }
    c->add_inputs()->set_handle(w.handle());
  }
  v1::OpCall* sum = chain.add_calls();
  sum->set_op("sum");
  sum->add_inputs()->mutable_call_output()->set_call(99);
  auto record = [&]() -> uint64_t {
    grpc::ClientContext context;
    v1::ExecuteResponse forward;
    EXPECT_TRUE(stub->Execute(&context, chain, &forward).ok());
    return forward.results_size() == 101 ? forward.results(100).outputs(0).handle() : 0;
  };
  v1::BackwardRequest backward;
  backward.set_session_id(session().id());
  backward.set_context_id(ctx.id());
  // One whole backward of such a chain, timed: the stopped one gets a tenth of that, so the
  // deadline falls well inside it on a fast machine or a busy one alike.
  backward.add_roots(record());
  Clock::time_point start = Clock::now();
  {
    grpc::ClientContext context;
    v1::BackwardResponse response;
    ASSERT_TRUE(stub->Backward(&context, backward, &response).ok());
  }
  const auto backward_time = Clock::now() - start;
  backward.set_roots(0, record());
  ASSERT_NE(backward.roots(0), 0u);
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, session().Info());
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + backward_time / 10);
    v1::BackwardResponse response;
    EXPECT_EQ(stub->Backward(&context, backward, &response).error_code(),
              grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, session().Info());
  EXPECT_EQ(after, before) << "no gradient stored, no graph freed";
  // The graph is whole: the same backward, given time, runs.
  grpc::ClientContext context;
  v1::BackwardResponse response;
  ASSERT_TRUE(stub->Backward(&context, backward, &response).ok());
  EXPECT_EQ(response.gradients_size(), 1);
}

TEST_F(FaultsTest, DisconnectMidPutLeavesNothing) {
  const uint64_t used = Used();
  const size_t handles = Handles();
  constexpr int64_t kFloats = 4 << 20;  // 16 MiB announced
  std::unique_ptr<v1::Tensord::Stub> stub = RawStub();
  grpc::ClientContext context;
  v1::PutTensorResponse response;
  auto writer = stub->PutTensor(&context, &response);
  v1::PutTensorRequest m;
  m.mutable_header()->set_session_id(session().id());
  m.mutable_header()->set_dtype(v1::DTYPE_F32);
  m.mutable_header()->add_shape(kFloats);
  ASSERT_TRUE(writer->Write(m));
  m.set_chunk(std::string(1 << 20, 'x'));
  ASSERT_TRUE(writer->Write(m));
  // The destination is charged as soon as the header is read.
  for (int i = 0; i < 100 && Used() != used + kFloats * 4; ++i) SleepMs(20);
  EXPECT_EQ(Used(), used + kFloats * 4);
  context.TryCancel();  // the client goes away mid-stream
  EXPECT_FALSE(writer->Finish().ok());
  for (int i = 0; i < 250 && Used() != used; ++i) SleepMs(20);
  EXPECT_EQ(Used(), used) << "the reserved memory went back to the quota";
  EXPECT_EQ(Handles(), handles) << "no handle was stored";
  // The session works on.
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, session().Put(tc::HostTensor(std::vector<float>{1, 2})));
  EXPECT_EQ(Floats(t), (std::vector<float>{1, 2}));
}

TEST_F(FaultsTest, VanishedClientsSessionIsCollectedWithAllItsMemory) {
  // Everything through the stub: the client library would close its session on destruction,
  // and this client never comes back.
  std::unique_ptr<v1::Tensord::Stub> stub = RawStub();
  const int64_t baseline = HeapBytes();
  std::string id;
  {
    grpc::ClientContext context;
    v1::CreateSessionRequest r;
    r.set_ttl_seconds(1);
    v1::CreateSessionResponse response;
    ASSERT_TRUE(stub->CreateSession(&context, r, &response).ok());
    id = response.session_id();
  }
  constexpr int64_t kFloats = 8 << 20;  // 32 MiB tensors
  auto put = [&](bool requires_grad, uint64_t ctx, bool finish) -> uint64_t {
    grpc::ClientContext context;
    v1::PutTensorResponse response;
    auto writer = stub->PutTensor(&context, &response);
    v1::PutTensorRequest m;
    m.mutable_header()->set_session_id(id);
    m.mutable_header()->set_dtype(v1::DTYPE_F32);
    m.mutable_header()->add_shape(kFloats);
    m.mutable_header()->set_requires_grad(requires_grad);
    m.mutable_header()->set_context_id(ctx);
    writer->Write(m);
    const std::string chunk(1 << 20, '\0');
    for (int64_t sent = 0; sent < (finish ? kFloats * 4 : 1 << 20); sent += chunk.size()) {
      m.set_chunk(chunk);
      writer->Write(m);
    }
    if (!finish) {
      context.TryCancel();
      writer->Finish().IgnoreError();
      return 0;
    }
    writer->WritesDone();
    EXPECT_TRUE(writer->Finish().ok());
    return response.tensor().handle();
  };
  uint64_t ctx;
  {
    grpc::ClientContext context;
    v1::OpenAutodiffContextRequest r;
    r.set_session_id(id);
    v1::OpenAutodiffContextResponse response;
    ASSERT_TRUE(stub->OpenAutodiffContext(&context, r, &response).ok());
    ctx = response.context_id();
  }
  const uint64_t plain = put(false, 0, true);
  const uint64_t leaf = put(true, ctx, true);
  put(false, 0, false);  // an abandoned upload
  {
    // A recorded chain (saved activations on the tape), then its gradients.
    grpc::ClientContext context;
    v1::ExecuteRequest r;
    r.set_session_id(id);
    r.set_context_id(ctx);
    v1::OpCall* mul = r.add_calls();
    mul->set_op("mul");
    mul->add_inputs()->set_handle(leaf);
    mul->add_inputs()->set_handle(plain);
    v1::OpCall* sum = r.add_calls();
    sum->set_op("sum");
    sum->add_inputs()->mutable_call_output()->set_call(0);
    v1::ExecuteResponse response;
    ASSERT_TRUE(stub->Execute(&context, r, &response).ok());
    grpc::ClientContext bctx;
    v1::BackwardRequest b;
    b.set_session_id(id);
    b.set_context_id(ctx);
    b.add_roots(response.results(1).outputs(0).handle());
    b.set_retain_graph(true);
    v1::BackwardResponse grads;
    ASSERT_TRUE(stub->Backward(&bctx, b, &grads).ok());
    ASSERT_EQ(grads.gradients_size(), 1);
  }
  // plain, leaf, the product, its sum and the gradient; the abandoned put holds nothing once
  // the server has seen the client go (polled: that happens on the server's own time).
  const uint64_t expected = static_cast<uint64_t>(4 * kFloats * 4 + 4);
  uint64_t used = 0;
  for (int i = 0; i < 100 && used != expected; ++i) {
    grpc::ClientContext context;
    v1::GetSessionInfoRequest r;
    r.set_session_id(id);
    v1::GetSessionInfoResponse info;
    ASSERT_TRUE(stub->GetSessionInfo(&context, r, &info).ok());
    used = info.memory_used_bytes();
    if (used != expected) SleepMs(20);
  }
  EXPECT_EQ(used, expected);
  // Loosely: memory other tests left behind may be freed meanwhile, lowering the heap a little.
  EXPECT_GE(HeapBytes() - baseline, 3 * kFloats * 4) << "the server holds the tensors";
  // The client vanishes. Past the TTL (1 s; the reaper runs every 100 ms) the session is gone.
  SleepMs(2500);
  {
    grpc::ClientContext context;
    v1::GetSessionInfoRequest r;
    r.set_session_id(id);
    v1::GetSessionInfoResponse info;
    EXPECT_TRUE(FailsWith(tc::FromGrpcStatus(stub->GetSessionInfo(&context, r, &info)),
                          absl::StatusCode::kNotFound, v1::SESSION_NOT_FOUND));
  }
  EXPECT_LT(HeapBytes() - baseline, kFloats * 4)
      << "tensors, tape and gradients of the collected session were freed";
}

}  // namespace
}  // namespace tensord::service_test
