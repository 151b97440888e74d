// bf16/f16 over the wire and through the C++ client: HostTensor conversions and .npy forms,
// Put/Get of 2-byte tensors, ops and gradients on them, and ListOps naming them.
#include <cstring>
#include <string>
#include <vector>

#include "common/half.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Not;

TEST(LowPrecisionHostTensorTest, FromFloatsRoundsAndToFloatsReads) {
  ASSERT_OK_AND_ASSIGN(tc::HostTensor b, tc::HostTensor::FromFloats({1.0f, 0.1f, -3.0f, 1e5f},
                                                                    {2, 2}, tc::DType::kBF16));
  EXPECT_EQ(b.dtype(), tc::DType::kBF16);
  EXPECT_EQ(b.nbytes(), 8u);
  EXPECT_OK(b.Validate());
  uint16_t first;
  std::memcpy(&first, b.bytes().data(), 2);
  EXPECT_EQ(first, 0x3f80);  // little-endian bfloat16 bits of 1.0
  ASSERT_OK_AND_ASSIGN(std::vector<float> bv, b.ToFloats());
  EXPECT_THAT(bv, ElementsAre(1.0f, BF16ToFloat(FloatToBF16(0.1f)), -3.0f, 99840.0f));
  EXPECT_THAT(b.ToDoubles(), ElementsAre(1.0, BF16ToFloat(FloatToBF16(0.1f)), -3.0, 99840.0));
  ASSERT_OK_AND_ASSIGN(tc::HostTensor h,
                       tc::HostTensor::FromFloats({1.0f, 0.1f, 1e5f}, {3}, tc::DType::kF16));
  EXPECT_EQ(tc::DTypeName(h.dtype()), "f16");
  ASSERT_OK_AND_ASSIGN(std::vector<float> hv, h.ToFloats());
  EXPECT_EQ(hv[1], HalfToFloat(FloatToHalf(0.1f)));
  EXPECT_TRUE(std::isinf(hv[2]));  // beyond 65504
  EXPECT_EQ(tc::ReasonOf(tc::HostTensor::FromFloats({1}, {1}, tc::DType::kI32).status()),
            v1::DTYPE_MISMATCH);
  EXPECT_EQ(tc::ReasonOf(tc::HostTensor(std::vector<int64_t>{1}).ToFloats().status()),
            v1::DTYPE_MISMATCH);
}

TEST(LowPrecisionHostTensorTest, NpyForms) {
  ASSERT_OK_AND_ASSIGN(tc::HostTensor h,
                       tc::HostTensor::FromFloats({0.5f, -2.0f, 3.0f}, {3}, tc::DType::kF16));
  const std::string npy = h.ToNpy();
  EXPECT_NE(npy.find("'descr': '<f2'"), std::string::npos);  // numpy's float16
  ASSERT_OK_AND_ASSIGN(tc::HostTensor h_back, tc::HostTensor::ParseNpy(npy));
  EXPECT_EQ(h_back, h);
  // NumPy has no bfloat16: its 16-bit patterns travel as '<u2' and come back as bf16.
  ASSERT_OK_AND_ASSIGN(tc::HostTensor b,
                       tc::HostTensor::FromFloats({0.5f, -2.0f}, {1, 2}, tc::DType::kBF16));
  const std::string bnpy = b.ToNpy();
  EXPECT_NE(bnpy.find("'descr': '<u2'"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(tc::HostTensor b_back, tc::HostTensor::ParseNpy(bnpy));
  EXPECT_EQ(b_back, b);
}

class LowPrecisionServiceTest : public ServiceTest {};

TEST_F(LowPrecisionServiceTest, PutGetAndOps) {
  for (tc::DType d : {tc::DType::kBF16, tc::DType::kF16}) {
    SCOPED_TRACE(tc::DTypeName(d));
    ASSERT_OK_AND_ASSIGN(tc::HostTensor a,
                         tc::HostTensor::FromFloats({1, 2, 3, 4, 5, 6}, {2, 3}, d));
    ASSERT_OK_AND_ASSIGN(tc::HostTensor b,
                         tc::HostTensor::FromFloats({1, 0, -1, 2, 0.5, 0.25}, {3, 2}, d));
    ASSERT_OK_AND_ASSIGN(tc::Tensor ta, session().Put(a));
    EXPECT_EQ(ta.dtype(), d);
    EXPECT_EQ(ta.nbytes(), 12u);
    ASSERT_OK_AND_ASSIGN(tc::HostTensor back, ta.ToHost());
    EXPECT_EQ(back, a);
    ASSERT_OK_AND_ASSIGN(tc::Tensor tb, session().Put(b));
    ASSERT_OK_AND_ASSIGN(tc::Tensor c, tc::Matmul(ta, tb));
    EXPECT_EQ(c.dtype(), d);
    ASSERT_OK_AND_ASSIGN(tc::HostTensor cv, c.ToHost());
    EXPECT_THAT(*cv.ToFloats(), ElementsAre(0.5, 4.75, 2, 11.5));
    // A literal of the 2-byte dtype inline in a batch, and a cast to f32.
    ASSERT_OK_AND_ASSIGN(tc::Tensor sum, session().Op1("add", {ta, a}));
    EXPECT_EQ(sum.dtype(), d);
    ASSERT_OK_AND_ASSIGN(tc::Tensor wide, tc::ToDtype(sum, tc::DType::kF32));
    ASSERT_OK_AND_ASSIGN(tc::HostTensor wv, wide.ToHost());
    EXPECT_THAT(*wv.ToVector<float>(), ElementsAre(2, 4, 6, 8, 10, 12));
  }
}

TEST_F(LowPrecisionServiceTest, GradientsComeBackInTheLeafDtype) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::HostTensor xv,
                       tc::HostTensor::FromFloats({1, -2, 3}, {3}, tc::DType::kBF16));
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, session().Put(xv, {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, tc::Sum(x * x));
  EXPECT_EQ(y.dtype(), tc::DType::kBF16);
  ASSERT_OK_AND_ASSIGN(tc::Gradients g, ctx.Backward({y}));
  tc::Tensor gx = g.grad(x);
  EXPECT_EQ(gx.dtype(), tc::DType::kBF16);
  ASSERT_OK_AND_ASSIGN(tc::HostTensor gv, gx.ToHost());
  EXPECT_THAT(*gv.ToFloats(), ElementsAre(2, -4, 6));
}

TEST_F(LowPrecisionServiceTest, ListOpsNamesTheTwoByteDtypesWhereF32Is) {
  ASSERT_OK_AND_ASSIGN(std::vector<tc::OpInfo> ops, client().Ops());
  int checked = 0;
  for (const tc::OpInfo& op : ops) {
    const auto& d = op.dtypes();
    const bool f32 = std::find(d.begin(), d.end(), v1::DTYPE_F32) != d.end();
    SCOPED_TRACE(op.name());
    // The optimizer steps write their inputs in place, which an f32 copy cannot do.
    const bool in_place_f32_only =
        op.name() == "sgd" || op.name() == "adam" || op.name() == "adamw";
    if (f32 && !in_place_f32_only) {
      EXPECT_THAT(d, Contains(v1::DTYPE_BF16));
      EXPECT_THAT(d, Contains(v1::DTYPE_F16));
      ++checked;
    } else {
      EXPECT_THAT(d, Not(Contains(v1::DTYPE_BF16)));
    }
  }
  EXPECT_GT(checked, 50);
}

TEST_F(LowPrecisionServiceTest, ListOpsNamesTheNarrowIntsWhereI32Is) {
  ASSERT_OK_AND_ASSIGN(std::vector<tc::OpInfo> ops, client().Ops());
  int checked = 0;
  for (const tc::OpInfo& op : ops) {
    const auto& d = op.dtypes();
    const bool i32 = std::find(d.begin(), d.end(), v1::DTYPE_I32) != d.end();
    SCOPED_TRACE(op.name());
    // Index operands stay i32/i64.
    const bool index = op.name() == "embedding" || op.name() == "one_hot";
    if (i32 && !index) {
      for (v1::DType n : {v1::DTYPE_U8, v1::DTYPE_I8, v1::DTYPE_I16}) EXPECT_THAT(d, Contains(n));
      ++checked;
    } else {
      EXPECT_THAT(d, Not(Contains(v1::DTYPE_U8)));
    }
  }
  EXPECT_GT(checked, 50);
}

}  // namespace
}  // namespace tensord::service_test
