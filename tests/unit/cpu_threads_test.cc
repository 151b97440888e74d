// The CPU backend's thread bound (--threads): a kernel call sets the calling thread's OpenMP
// team size, which oneDNN's parallel regions follow, and the device description says so. Loop
// kernels share a large output among those threads with the bits of one thread.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "server/backends/cpu/cpu_backend.h"
#include "server/backends/cpu/parallel_regions.h"
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

// Runs `op` on `inputs` through `backend` into an output of `shape`.
absl::StatusOr<Tensor> RunOn(Backend& backend, const std::string& op, std::vector<Tensor> inputs,
                             const Shape& shape, DType dtype) {
  ASSIGN_OR_RETURN(const OpDef* def, OpRegistry::Builtin().Find(op));
  ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(dtype, shape));
  std::vector<Tensor> outputs = {out};
  const std::vector<TensorMeta> metas = {out.meta()};
  ASSIGN_OR_RETURN(Attrs attrs, ValidateAttrs(op, def->attrs, {}));
  std::vector<DType> dtypes;
  std::vector<TensorMeta> input_metas;
  for (const Tensor& t : inputs) {
    dtypes.push_back(t.dtype());
    input_metas.push_back(t.meta());
  }
  ASSIGN_OR_RETURN(KernelPlan plan,
                   backend.Plan({*def, dtypes, &attrs, input_metas, metas, "cpu"}));
  KernelCall call{*def, inputs, attrs, outputs, metas, nullptr};
  RETURN_IF_ERROR(backend.Run(plan, call));
  return outputs[0];
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

TEST(CpuThreads, LoopKernelsGiveOneThreadsBitsOnAnyTeam) {
  // Outputs above the loops' parallel threshold (ParallelElements: at most 833,334 elements,
  // with a parallel region at its 25 us bound), with rows that do not divide into the threads'
  // blocks: flat, a scalar operand, broadcast rows, a middle broadcast dim.
  ASSERT_LE(cpu::ParallelElements(), 833334);
  struct Case {
    std::string op;
    std::vector<Shape> shapes;
    Shape out;
  };
  const std::vector<Case> cases = {
      {"maximum", {{900001}, {900001}}, {900001}},
      {"atan2", {{900001}, {}}, {900001}},
      {"fmod", {{300000, 3}, {3}}, {300000, 3}},
      {"maximum", {{17, 1, 10007}, {5, 1}}, {17, 5, 10007}},
      {"where", {{3, 1}, {3, 300000}, {300000}}, {3, 300000}},
      {"trunc", {{900, 1001}}, {900, 1001}},
  };
  CpuBackendOptions one, two;
  one.threads = 1;
  two.threads = 2;
  std::unique_ptr<Backend> serial = MakeCpuBackend(one);
  std::unique_ptr<Backend> shared = MakeCpuBackend(two);
  uint32_t seed = 10;
  for (const Case& c : cases) {
    std::vector<Tensor> inputs;
    for (const Shape& shape : c.shapes) {
      const bool mask = c.op == "where" && inputs.empty();
      inputs.push_back(testing::Random(mask ? DType::kBool : DType::kF32, shape, seed++, -3, 3));
    }
    Tensor a, b;
    std::thread([&] {
      auto r = RunOn(*serial, c.op, inputs, c.out, DType::kF32);
      ASSERT_TRUE(r.ok()) << c.op << ": " << r.status();
      a = *r;
    }).join();
    std::thread([&] {
      auto r = RunOn(*shared, c.op, inputs, c.out, DType::kF32);
      ASSERT_TRUE(r.ok()) << c.op << ": " << r.status();
      b = *r;
    }).join();
    ASSERT_TRUE(a.defined() && b.defined()) << c.op;
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << c.op;
    // And one thread's bits are each element's own function.
    if (c.op == "maximum" && c.shapes[0].size() == 3) {
      const float* x = inputs[0].data<float>();
      const float* y = inputs[1].data<float>();
      const float* z = a.data<float>();
      for (int64_t i = 0; i < 17; ++i) {
        for (int64_t j = 0; j < 5; ++j) {
          for (int64_t k = 0; k < 10007; k += 97) {
            ASSERT_EQ(z[(i * 5 + j) * 10007 + k], std::max(x[i * 10007 + k], y[j])) << i << j << k;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tensord
