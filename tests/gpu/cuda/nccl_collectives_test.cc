// NCCL as the collectives library of CUDA devices (server/backends/cuda/nccl_collectives.h):
// one rank per CUDA device of the machine, each on a thread of its own, runs every collective
// against the values computed on the host; a rank that never joins fails the one that did with
// PEER_UNAVAILABLE (cause timeout) within the timeout; and a session's all_reduce on a CUDA
// device in a process group (of one: NCCL takes one rank per GPU) runs through the group's
// NCCL communicator, or through host memory for a dtype NCCL does not reduce.
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/cuda/cuda_runtime.h"
#include "server/core/status.h"
#include "server/distributed/process_group.h"
#include "tests/gpu/gpu_test_util.h"

namespace tensord::testing {
namespace {

using std::chrono::milliseconds;

// The NCCL of the first CUDA device, or a skip (a failure where a GPU is required: the
// library must then be there).
#define TENSORD_REQUIRE_NCCL(lib)                                                         \
  TENSORD_REQUIRE_DEVICE(device_under_test);                                              \
  if (cuda::Devices().empty()) GTEST_SKIP() << "no CUDA device";                          \
  DeviceCollectives* lib = cuda::Devices()[0]->collectives();                             \
  if (lib == nullptr) {                                                                   \
    if (std::getenv("TENSORD_REQUIRE_GPU") != nullptr) FAIL() << "NCCL cannot be loaded"; \
    GTEST_SKIP() << "NCCL cannot be loaded";                                              \
  }

// Rank r's input: [world * 2, 3] values r * 100 + i (exact in every dtype used here).
Tensor RankInput(int r, int world, DType dtype) {
  std::vector<double> v(world * 2 * 3);
  for (size_t i = 0; i < v.size(); ++i) v[i] = r * 100.0 + static_cast<double>(i);
  Tensor f64 = Tensor::FromVector<double>(v, {world * 2, 3});
  return DeviceDispatcher()
      .Call("to_dtype", {f64}, {{"dtype", std::string(DTypeName(dtype))}}, CallEnv())
      .value()[0];
}

Tensor Empty(DType dtype, Shape shape, const std::string& device) {
  return MoveTo(Tensor::Zeros(dtype, std::move(shape)).value(), device);
}

std::vector<double> Values(const Tensor& t) { return MoveTo(t, kHostDevice).ToDoubles(); }

TEST(NcclCollectives, EveryCollectiveAcrossTheCudaDevices) {
  TENSORD_REQUIRE_NCCL(first);
  const auto& devices = cuda::Devices();
  const int world = static_cast<int>(devices.size());
  const std::string id = first->NewId().value();
  ASSERT_EQ(id.size(), first->id_bytes());
  const int n = world * 2 * 3;
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32, DType::kU8}) {
    SCOPED_TRACE(DTypeName(dtype));
    auto rank = [&](int r) -> std::vector<std::vector<double>> {
      cuda::CudaDevice& d = *devices[r];
      DeviceCollectives* lib = d.collectives();
      EXPECT_NE(lib, nullptr) << d.name();
      if (lib == nullptr) return {};
      auto comm = lib->Join(id, r, world, milliseconds(30000));
      EXPECT_TRUE(comm.ok()) << comm.status();
      if (!comm.ok()) return {};
      const Tensor in = MoveTo(RankInput(r, world, dtype), d.name());
      Tensor sum = Empty(dtype, in.shape(), d.name()), max = Empty(dtype, in.shape(), d.name());
      Tensor gathered = Empty(dtype, {world * world * 2, 3}, d.name());
      Tensor part = Empty(dtype, {2, 3}, d.name()), cast = Empty(dtype, in.shape(), d.name());
      Tensor reduced = Empty(dtype, in.shape(), d.name());
      EXPECT_TRUE((*comm)->AllReduce(in, sum, "sum").ok());
      EXPECT_TRUE((*comm)->AllReduce(in, max, "max").ok());
      EXPECT_TRUE((*comm)->AllGather(in, gathered).ok());
      EXPECT_TRUE((*comm)->ReduceScatter(in, part, "sum").ok());
      EXPECT_TRUE((*comm)->Broadcast(in, cast, world - 1).ok());
      EXPECT_TRUE((*comm)->Reduce(in, reduced, "sum", 0).ok());
      return {Values(sum),  Values(max),  Values(gathered),
              Values(part), Values(cast), Values(reduced)};
    };
    std::vector<std::future<std::vector<std::vector<double>>>> ranks;
    for (int r = 0; r < world; ++r) ranks.push_back(std::async(std::launch::async, rank, r));
    const auto wrap = [&](double v) {  // u8 sums wrap as the dtype's own sum would
      return dtype == DType::kU8 ? static_cast<double>(static_cast<uint8_t>(v)) : v;
    };
    for (int r = 0; r < world; ++r) {
      const std::vector<std::vector<double>> got = ranks[r].get();
      ASSERT_EQ(got.size(), 6u) << "rank " << r;
      for (int i = 0; i < n; ++i) {
        double total = 0, top = 0;
        for (int q = 0; q < world; ++q) {
          total += wrap(q * 100.0 + i);
          top = std::max(top, wrap(q * 100.0 + i));
        }
        EXPECT_EQ(got[0][i], wrap(total)) << "all_reduce sum, rank " << r << ", element " << i;
        EXPECT_EQ(got[1][i], top);
        EXPECT_EQ(got[4][i], wrap((world - 1) * 100.0 + i));
        EXPECT_EQ(got[5][i], r == 0 ? wrap(total) : 0.0);
      }
      for (int q = 0; q < world; ++q) {
        for (int i = 0; i < n; ++i) EXPECT_EQ(got[2][q * n + i], wrap(q * 100.0 + i));
      }
      for (int i = 0; i < 6; ++i) {
        double total = 0;
        for (int q = 0; q < world; ++q) total += wrap(q * 100.0 + r * 6 + i);
        EXPECT_EQ(got[3][i], wrap(total)) << "reduce_scatter, rank " << r;
      }
    }
  }
}

TEST(NcclCollectives, ARankThatNeverJoinsIsPeerUnavailableWithinTheTimeout) {
  TENSORD_REQUIRE_NCCL(lib);
  const auto start = std::chrono::steady_clock::now();
  auto comm = lib->Join(lib->NewId().value(), 0, 2, milliseconds(1500));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(GetReason(comm.status()), Reason::kPeerUnavailable) << comm.status();
  EXPECT_EQ(GetMetadata(comm.status())["cause"], "timeout");
  EXPECT_LT(took, std::chrono::seconds(10));
}

TEST(NcclCollectives, ASessionsAllReduceOnACudaDeviceRunsInAGroupOfOne) {
  TENSORD_REQUIRE_NCCL(lib);
  const std::string device = cuda::Devices()[0]->name();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("tensord-nccl-", getpid());
  std::filesystem::create_directories(dir);
  distributed::GroupOptions options;
  options.name = absl::StrCat("nccl-", getpid());
  options.rendezvous = absl::StrCat("file://", dir.string());
  distributed::CollectiveConfig config;
  config.address = "127.0.0.1";
  config.timeout = milliseconds(20000);
  auto group = distributed::JoinGroup(options, config);
  ASSERT_TRUE(group.ok()) << group.status();
  CallEnv env;
  env.group = *group;
  const Tensor x = MoveTo(RankInput(0, 1, DType::kF32), device);
  for (const std::string op : {"sum", "mean", "max"}) {
    auto out = DeviceDispatcher().Call("all_reduce", {x}, {{"op", op}}, env);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].device(), device);
    EXPECT_EQ(Values((*out)[0]), Values(x)) << op;
  }
  // The same call on i16, which NCCL does not reduce, stages through host memory.
  const Tensor narrow = MoveTo(RankInput(0, 1, DType::kI16), device);
  auto out = DeviceDispatcher().Call("all_reduce", {narrow}, {}, env);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), Values(narrow));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tensord::testing
