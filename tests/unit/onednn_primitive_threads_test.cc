// The threads a oneDNN primitive runs on (server/backends/cpu/onednn_primitive_threads.cc): a
// primitive with little work runs on one thread of a team of several, built for one and run on
// one, and computes what the loops compute; a large one keeps the team; the team is restored
// after each.
#include <gtest/gtest.h>
#include <omp.h>

#include <string>
#include <vector>

#include "server/backends/cpu/onednn_common.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {

using cpu::onednn::CachedPrimitive;
using testing::AllClose;
using testing::Random;

dnnl::matmul::primitive_desc MatmulPd(int64_t m, int64_t k, int64_t n) {
  using dnnl::memory;
  const auto f32 = memory::data_type::f32;
  const memory::desc a({m, k}, f32, memory::format_tag::ab);
  const memory::desc b({k, n}, f32, memory::format_tag::ab);
  const memory::desc c({m, n}, f32, memory::format_tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), cpu::onednn::Attr(),
                                      cpu::onednn::Engine());
}

class PrimitiveThreadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    team_ = omp_get_max_threads();
    omp_set_num_threads(2);
  }
  void TearDown() override { omp_set_num_threads(team_); }
  int team_ = 1;
};

TEST_F(PrimitiveThreadsTest, LittleWorkRunsOnOneThreadAndMuchOnTheTeam) {
  const double region = cpu::ParallelRegionMicros();
  EXPECT_GE(region, 0.5);
  EXPECT_LE(region, 25.0);
  EXPECT_EQ(cpu::onednn::PrimitiveThreads(MatmulPd(8, 8, 8)), 1);
  // 4.3 GFLOP: far more than two shares on any machine the bounds allow.
  EXPECT_EQ(cpu::onednn::PrimitiveThreads(MatmulPd(2048, 1024, 1024)), 2);
  // A memory-bound primitive: a reorder of 64 values, and of 64 Mi values.
  for (int64_t n : {int64_t{64}, int64_t{1} << 26}) {
    const dnnl::memory::desc from({n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
    const dnnl::memory::desc to({n}, dnnl::memory::data_type::f16, dnnl::memory::format_tag::a);
    dnnl::reorder::primitive_desc pd(cpu::onednn::Engine(), from, cpu::onednn::Engine(), to);
    EXPECT_EQ(cpu::onednn::PrimitiveThreads(pd), n == 64 ? 1 : 2) << n;
  }
}

TEST_F(PrimitiveThreadsTest, AOneThreadPrimitiveIsBuiltAndRunOnOneThread) {
  int built = 0, team_when_built = 0;
  auto prim = cpu::onednn::GetCachedPrimitive("threads_test|matmul 16x24x8", [&] {
    ++built;
    team_when_built = omp_get_max_threads();
    auto pd = MatmulPd(16, 24, 8);
    return CachedPrimitive{dnnl::matmul(pd), pd};
  });
  EXPECT_EQ(prim->threads, 1);
  EXPECT_EQ(built, 2) << "built for the team, then again for one thread";
  EXPECT_EQ(team_when_built, 1);
  EXPECT_EQ(omp_get_max_threads(), 2) << "the team is restored";

  Tensor a = Random(DType::kF32, {16, 24}, 1), b = Random(DType::kF32, {24, 8}, 2);
  absl::StatusOr<Tensor> c = Tensor::Empty(DType::kF32, {16, 8});
  ASSERT_TRUE(c.ok());
  cpu::onednn::Execute(*prim, {{DNNL_ARG_SRC, cpu::onednn::Wrap(a, prim->pd.src_desc())},
                               {DNNL_ARG_WEIGHTS, cpu::onednn::Wrap(b, prim->pd.weights_desc())},
                               {DNNL_ARG_DST, cpu::onednn::Wrap(*c, prim->pd.dst_desc())}});
  EXPECT_EQ(omp_get_max_threads(), 2);
  std::vector<double> expected(16 * 8, 0.0);
  const std::vector<double> av = a.ToDoubles(), bv = b.ToDoubles();
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      for (int k = 0; k < 24; ++k) expected[i * 8 + j] += av[i * 24 + k] * bv[k * 8 + j];
    }
  }
  EXPECT_TRUE(AllClose(*c, expected, 1e-5, 1e-5));
}

TEST_F(PrimitiveThreadsTest, SmallAndLargeProductsThroughTheKernelMatchTheLoops) {
  for (int64_t m : {int64_t{12}, int64_t{700}}) {
    Tensor a = Random(DType::kF32, {m, 300}, 3), b = Random(DType::kF32, {300, 500}, 4);
    absl::StatusOr<std::vector<Tensor>> onednn = testing::RunOp("matmul", {a, b});
    ASSERT_TRUE(onednn.ok()) << onednn.status();
    EXPECT_EQ(omp_get_max_threads(), 2);
    const Tensor a64 = testing::CastTo(a, DType::kF64), b64 = testing::CastTo(b, DType::kF64);
    const Tensor loops = testing::CastTo(testing::Run1("matmul", {a64, b64}), DType::kF32);
    EXPECT_TRUE(AllClose((*onednn)[0], loops, 1e-4, 1e-4)) << m;
  }
}

}  // namespace
}  // namespace tensord
