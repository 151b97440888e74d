// A session's float32 matmul precision (server/core/matmul_precision.h): set at CreateSession,
// reported back, refused when unknown, and without effect on the CPU's products.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

class MatmulPrecisionTest : public ServiceTest {
 protected:
  static absl::StatusOr<tc::Session> Open(const std::string& precision) {
    tc::SessionOptions options;
    options.float32_matmul_precision = precision;
    return client().CreateSession(options);
  }
};

TEST_F(MatmulPrecisionTest, ASessionReportsThePrecisionItWasCreatedWith) {
  EXPECT_EQ(session().float32_matmul_precision(), "highest");
  for (const std::string precision : {"highest", "high", "medium"}) {
    ASSERT_OK_AND_ASSIGN(tc::Session s, Open(precision));
    EXPECT_EQ(s.float32_matmul_precision(), precision);
    ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, s.Info());
    EXPECT_EQ(info.float32_matmul_precision, precision);
  }
}

TEST_F(MatmulPrecisionTest, AnUnknownPrecisionIsRefusedAndNoSessionMade) {
  for (const std::string bad : {"tf32", "HIGH", "low", " high"}) {
    EXPECT_TRUE(FailsWith(Open(bad).status(), absl::StatusCode::kInvalidArgument,
                          v1::INVALID_REQUEST,
                          {{"field", "float32_matmul_precision"}, {"value", bad}}))
        << bad;
  }
}

// The CPU computes f32 products in f32 whatever a session allows (as PyTorch's CPU does for
// "high"), so every precision gives the same bits, forward and backward.
TEST_F(MatmulPrecisionTest, TheCpuGivesTheSameBitsAtEveryPrecision) {
  std::vector<float> x(64 * 96), w(96 * 32), b(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37 % 101) - 50) / 7.0f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 13 % 89) - 44) / 11.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i) / 3.0f;
  std::vector<std::string> results;
  for (const std::string precision : {"highest", "high", "medium"}) {
    ASSERT_OK_AND_ASSIGN(tc::Session s, Open(precision));
    ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, s.OpenAutodiff());
    ASSERT_OK_AND_ASSIGN(tc::Tensor tx, s.Put(tc::HostTensor(x, {64, 96})));
    ASSERT_OK_AND_ASSIGN(tc::Tensor tw, s.Put(tc::HostTensor(w, {32, 96}), {true, ctx.id()}));
    ASSERT_OK_AND_ASSIGN(tc::Tensor tb, s.Put(tc::HostTensor(b, {32})));
    ASSERT_OK_AND_ASSIGN(tc::Tensor y, s.Op1("linear", {tx, tw, tb}));
    ASSERT_OK_AND_ASSIGN(tc::Tensor prod, s.Op1("matmul", {y, tw}));
    ASSERT_OK_AND_ASSIGN(tc::Tensor loss, s.Op1("sum", {prod}));
    ASSERT_OK_AND_ASSIGN(tc::Gradients grads, ctx.Backward({loss}));
    ASSERT_OK_AND_ASSIGN(tc::HostTensor value, s.Get(prod));
    ASSERT_OK_AND_ASSIGN(tc::HostTensor grad, s.Get(grads.grad(tw)));
    results.push_back(value.bytes() + grad.bytes());
  }
  EXPECT_EQ(results[1], results[0]);
  EXPECT_EQ(results[2], results[0]);
}

}  // namespace
}  // namespace tensord::service_test
