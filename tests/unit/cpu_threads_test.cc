// The CPU backend's thread bound (--threads): a kernel call sets the calling thread's OpenMP
// team size, which oneDNN's parallel regions follow, and the device description says so.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <thread>

#include "server/backends/cpu/cpu_backend.h"
#include "server/core/status.h"
#include "server/ops/registry.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {

// omp_get_max_threads of the calling thread, looked up as the backend looks up its setter.
int MaxThreads() {
  using Get = int (*)();
  static const auto get = reinterpret_cast<Get>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return get == nullptr ? -1 : get();
}

absl::Status RunMatmul(Backend& backend) {
  ASSIGN_OR_RETURN(const OpDef* def, OpRegistry::Builtin().Find("matmul"));
  const Tensor a = testing::Random(DType::kF32, {64, 64}, 1);
  const Tensor b = testing::Random(DType::kF32, {64, 64}, 2);
  std::vector<Tensor> inputs = {a, b};
  ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(DType::kF32, {64, 64}));
  std::vector<Tensor> outputs = {out};
  const std::vector<TensorMeta> metas = {out.meta()};
  Attrs attrs;
  const std::vector<DType> dtypes = {DType::kF32, DType::kF32};
  const std::vector<TensorMeta> input_metas = {a.meta(), b.meta()};
  ASSIGN_OR_RETURN(KernelPlan plan,
                   backend.Plan({*def, dtypes, &attrs, input_metas, metas, "cpu"}));
  KernelCall call{*def, inputs, attrs, outputs, metas, nullptr};
  return backend.Run(plan, call);
}

TEST(CpuThreads, AKernelCallBoundsItsThreadsTeam) {
  if (MaxThreads() < 0) GTEST_SKIP() << "oneDNN runs without an OpenMP runtime here";
  CpuBackendOptions one;
  one.threads = 1;
  std::unique_ptr<Backend> bounded = MakeCpuBackend(one);
  EXPECT_NE(bounded->Devices()[0].description.find("(1 per kernel call)"), std::string::npos);
  // On a fresh thread (the server's are not OpenMP's): before the call OpenMP's default, after
  // it the bound, for every later call of that thread.
  std::thread worker([&] {
    ASSERT_TRUE(RunMatmul(*bounded).ok());
    EXPECT_EQ(MaxThreads(), 1);
    ASSERT_TRUE(RunMatmul(*bounded).ok());
    EXPECT_EQ(MaxThreads(), 1);
  });
  worker.join();
  // Unbounded, a thread keeps OpenMP's default.
  std::unique_ptr<Backend> unbounded = MakeCpuBackend();
  EXPECT_EQ(unbounded->Devices()[0].description.find("per kernel call"), std::string::npos);
  int before = 0, after = 0;
  std::thread other([&] {
    before = MaxThreads();
    ASSERT_TRUE(RunMatmul(*unbounded).ok());
    after = MaxThreads();
  });
  other.join();
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace tensord
