// The tensord binary on SIGTERM and SIGINT: it stops accepting, lets the batch in flight
// finish within --shutdown_grace, and exits 0; a batch longer than the grace is cancelled
// and the exit is still clean. Also: the limit flags and variables reach the server.
#include <signal.h>

#include <chrono>
#include <map>
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

namespace v1 = ::tensord::v1;
using Clock = std::chrono::steady_clock;

using Process = ::tensord::testing::TensordProcess;
using ::tensord::testing::TensordPath;

class ShutdownTest : public ::testing::TestWithParam<int> {
 protected:
  std::unique_ptr<v1::Tensord::Stub> Connect(int port) {
    return v1::Tensord::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  // A session holding a 512x512 matrix, and a batch of `calls` matmuls of it.
  v1::ExecuteRequest SlowBatch(v1::Tensord::Stub& stub, int calls) {
    v1::ExecuteRequest batch;
    grpc::ClientContext c1;
    v1::CreateSessionResponse session;
    EXPECT_TRUE(stub.CreateSession(&c1, v1::CreateSessionRequest(), &session).ok());
    batch.set_session_id(session.session_id());
    v1::ExecuteRequest make;
    make.set_session_id(session.session_id());
    v1::OpCall* ones = make.add_calls();
    ones->set_op("ones");
    for (int64_t d : {512, 512}) (*ones->mutable_attrs())["shape"].mutable_ints()->add_values(d);
    grpc::ClientContext c2;
    v1::ExecuteResponse made;
    EXPECT_TRUE(stub.Execute(&c2, make, &made).ok());
    const uint64_t a = made.results(0).outputs(0).handle();
    for (int k = 0; k < calls; ++k) {
      v1::OpCall* c = batch.add_calls();
      c->set_op("matmul");
      c->add_inputs()->set_handle(a);
      c->add_inputs()->set_handle(a);
    }
    return batch;
  }
  // How long `batch` takes on this machine.
  Clock::duration Time(v1::Tensord::Stub& stub, const v1::ExecuteRequest& batch) {
    grpc::ClientContext context;
    v1::ExecuteResponse response;
    const Clock::time_point start = Clock::now();
    EXPECT_TRUE(stub.Execute(&context, batch, &response).ok());
    return Clock::now() - start;
  }
};

TEST_P(ShutdownTest, InFlightBatchFinishesThenExitZero) {
  Process server({"--shutdown_grace=60s"});
  ASSERT_GT(server.port(), 0) << "tensord did not start (" << TensordPath() << ")";
  std::unique_ptr<v1::Tensord::Stub> stub = Connect(server.port());
  const v1::ExecuteRequest batch = SlowBatch(*stub, 100);
  const Clock::duration full = Time(*stub, batch);

  grpc::Status status;
  v1::ExecuteResponse response;
  std::thread call([&] {
    grpc::ClientContext context;
    status = stub->Execute(&context, batch, &response);
  });
  std::this_thread::sleep_for(full / 4);  // the batch is running
  server.Signal(GetParam());
  // No new calls are accepted meanwhile.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  {
    std::unique_ptr<v1::Tensord::Stub> late = Connect(server.port());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    v1::ListDevicesResponse devices;
    EXPECT_FALSE(late->ListDevices(&context, v1::ListDevicesRequest(), &devices).ok());
  }
  call.join();
  EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_EQ(response.results_size(), 100);
  EXPECT_EQ(server.Wait(std::chrono::seconds(60)), 0);
}

TEST_P(ShutdownTest, BatchLongerThanTheGraceIsCancelledAndExitIsClean) {
  Process server({"--shutdown_grace=200ms"});
  ASSERT_GT(server.port(), 0) << "tensord did not start (" << TensordPath() << ")";
  std::unique_ptr<v1::Tensord::Stub> stub = Connect(server.port());
  const v1::ExecuteRequest probe = SlowBatch(*stub, 20);
  const Clock::duration per_call = Time(*stub, probe) / 20;
  // About ten seconds of work, far past the grace.
  const int calls = static_cast<int>(std::min<int64_t>(
      20000 - 1, std::chrono::seconds(10) / std::max(per_call, Clock::duration(1))));
  v1::ExecuteRequest batch = SlowBatch(*stub, std::min(calls, 9999));

  grpc::Status status;
  std::thread call([&] {
    grpc::ClientContext context;
    v1::ExecuteResponse response;
    status = stub->Execute(&context, batch, &response);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const Clock::time_point signalled = Clock::now();
  server.Signal(GetParam());
  EXPECT_EQ(server.Wait(std::chrono::seconds(30)), 0);
  call.join();
  EXPECT_FALSE(status.ok()) << "the batch was cut off by the shutdown";
  EXPECT_LT(Clock::now() - signalled, std::chrono::seconds(8))
      << "the server stopped the batch between calls instead of running it out";
}

// Limits from dashed and underscored flags and from TENSORD_* variables.
TEST(LimitFlagsTest, FlagsAndVariablesSetTheLimits) {
  setenv("TENSORD_MAX_DIM", "100", 1);
  setenv("TENSORD_SHUTDOWN_GRACE", "1s", 1);
  Process server({"--max-rank=2", "--max_calls_per_batch=3"});
  unsetenv("TENSORD_MAX_DIM");
  unsetenv("TENSORD_SHUTDOWN_GRACE");
  ASSERT_GT(server.port(), 0) << "tensord did not start (" << TensordPath() << ")";
  auto stub = v1::Tensord::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.port()),
                                                       grpc::InsecureChannelCredentials()));
  grpc::ClientContext c1;
  v1::CreateSessionResponse session;
  ASSERT_TRUE(stub->CreateSession(&c1, v1::CreateSessionRequest(), &session).ok());
  auto execute = [&](std::vector<int64_t> shape, int calls) {
    v1::ExecuteRequest r;
    r.set_session_id(session.session_id());
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    for (int k = 0; k < calls; ++k) {
      v1::OpCall* c = r.add_calls();
      c->set_op("neg");
      v1::TensorData* t = c->add_inputs()->mutable_literal();
      t->set_dtype(v1::DTYPE_F32);
      for (int64_t d : shape) t->add_shape(d);
      t->set_data(std::string(n * 4, '\0'));
    }
    grpc::ClientContext context;
    v1::ExecuteResponse response;
    return client::FromGrpcStatus(stub->Execute(&context, r, &response));
  };
  auto limit_of = [](const absl::Status& s) {
    std::map<std::string, std::string> md = client::MetadataOf(s);
    return absl::StrCat(client::ReasonNameOf(s), " ", md["limit"], "=", md["max"]);
  };
  EXPECT_TRUE(execute({2, 100}, 3).ok());
  EXPECT_EQ(limit_of(execute({1, 1, 1}, 1)), "LIMIT_EXCEEDED max_rank=2");
  EXPECT_EQ(limit_of(execute({101}, 1)), "LIMIT_EXCEEDED max_dim=100");
  EXPECT_EQ(limit_of(execute({1}, 4)), "LIMIT_EXCEEDED max_calls_per_batch=3");
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(std::chrono::seconds(30)), 0);
}

TEST(LimitFlagsTest, InvalidLimitIsRefusedAtStart) {
  Process server({"--max_rank=0"});
  EXPECT_EQ(server.port(), 0);
  EXPECT_EQ(server.Wait(std::chrono::seconds(30)), 1);
}

INSTANTIATE_TEST_SUITE_P(Signals, ShutdownTest, ::testing::Values(SIGTERM, SIGINT),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == SIGTERM ? "SIGTERM" : "SIGINT");
                         });

}  // namespace
}  // namespace tensord
