// The tensord binary on SIGTERM and SIGINT: it stops accepting, lets the batch in flight
// finish within --shutdown_grace, and exits 0; a batch longer than the grace is cancelled
// and the exit is still clean. Also: the limit flags and variables reach the server.
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cpp/tensord.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tensord/v1/service.grpc.pb.h"

namespace tensord {
namespace {

namespace v1 = ::tensord::v1;
using Clock = std::chrono::steady_clock;

std::string TensordPath() {
  if (const char* bin = std::getenv("TENSORD_BIN")) return bin;
  return TENSORD_PATH;
}

// A tensord process on a free port; killed (SIGKILL) if a test leaves it running.
class Process {
 public:
  explicit Process(std::vector<std::string> flags) {
    int err[2];
    if (pipe(err) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(err[1], STDERR_FILENO);
      close(err[0]);
      close(err[1]);
      std::vector<std::string> args = {TensordPath(), "--address=127.0.0.1:0"};
      args.insert(args.end(), flags.begin(), flags.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(err[1]);
    err_ = fdopen(err[0], "r");
    // The start-up line names the port: "tensord listening on 127.0.0.1:PORT (...)".
    char line[1024];
    static const std::regex kListening("listening on [^ ]*:([0-9]+)");
    while (err_ != nullptr && fgets(line, sizeof(line), err_) != nullptr) {
      std::cmatch m;
      if (std::regex_search(line, m, kListening)) {
        port_ = std::stoi(m[1].str());
        break;
      }
    }
  }
  ~Process() {
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (err_ != nullptr) fclose(err_);
  }

  int port() const { return port_; }
  void Signal(int sig) { kill(pid_, sig); }
  // The exit code, or -signal when killed; -1000 when it did not exit within `timeout`.
  int Wait(std::chrono::seconds timeout) {
    const Clock::time_point end = Clock::now() + timeout;
    int status = 0;
    while (Clock::now() < end) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        waited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1000;
  }

 private:
  pid_t pid_ = -1;
  FILE* err_ = nullptr;
  int port_ = 0;
  bool waited_ = false;
};

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
