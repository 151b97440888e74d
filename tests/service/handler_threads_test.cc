// The server's handler threads: sessions calling at once are served by threads the server
// keeps, not by a thread started for a call and ended after it.
#include <dirent.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

// The thread ids of this process whose name is gRPC's synchronous server thread's
// ("grpcpp_sync_server", cut to the kernel's 15 characters).
std::set<std::string> HandlerThreads() {
  std::set<std::string> ids;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return ids;
  while (dirent* entry = readdir(dir)) {
    const std::string id = entry->d_name;
    if (id == "." || id == "..") continue;
    std::ifstream comm("/proc/self/task/" + id + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("grpcpp_sync", 0) == 0) ids.insert(id);
  }
  closedir(dir);
  return ids;
}

class HandlerThreadsTest : public ServiceTest {};

TEST_F(HandlerThreadsTest, TwoSessionsCallingAtOnceReuseTheServersThreads) {
  ASSERT_OK_AND_ASSIGN(tc::Session other, client().CreateSession());
  tc::Session* sessions[2] = {&session(), &other};
  std::vector<tc::Tensor> inputs;
  for (tc::Session* s : sessions) {
    ASSERT_OK_AND_ASSIGN(tc::Tensor t, s->Put(tc::HostTensor::Zeros(tc::DType::kF32, {4})));
    inputs.push_back(t);
  }
  // Both sessions call `rounds` times, each call overlapping the other session's.
  auto both = [&](int rounds) {
    std::vector<std::thread> threads;
    for (int s = 0; s < 2; ++s) {
      threads.emplace_back([&, s] {
        for (int k = 0; k < rounds; ++k) {
          absl::StatusOr<tc::Tensor> sum = sessions[s]->Op1("add", {inputs[s], inputs[s]});
          ASSERT_TRUE(sum.ok()) << sum.status();
        }
      });
    }
    for (std::thread& t : threads) t.join();
  };
  both(20);
  const std::set<std::string> kept = HandlerThreads();
  ASSERT_FALSE(kept.empty()) << "no thread named grpcpp_sync_server in this process";
  // Every handler thread seen while they call again, looked for every half millisecond.
  std::set<std::string> seen;
  std::atomic<bool> done{false};
  std::thread watch([&] {
    while (!done.load()) {
      const std::set<std::string> now = HandlerThreads();
      seen.insert(now.begin(), now.end());
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  both(200);
  done = true;
  watch.join();
  std::vector<std::string> started;
  for (const std::string& id : seen) {
    if (!kept.count(id)) started.push_back(id);
  }
  // gRPC's defaults keep two idle threads: two calls at once started a thread and ended
  // another on most of the 400 calls.
  EXPECT_LE(started.size(), 2u) << started.size() << " handler threads started after warm-up";
}

}  // namespace
}  // namespace tensord::service_test
