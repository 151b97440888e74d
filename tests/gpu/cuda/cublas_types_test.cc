// The cuBLASLt types a GEMM is set up with (server/backends/cuda/cublas_types.h), which need no
// GPU to check: f32 computes in f32 unless the session allows TensorFloat-32 or bfloat16
// products; bf16 and f16 keep their 2-byte operands and sum in f32; f64 is f64 throughout.
#include "server/backends/cuda/cublas_types.h"

#include "gtest/gtest.h"

namespace tensord::cuda {
namespace {

void ExpectTypes(DType dtype, MatmulPrecision precision, cudaDataType_t data,
                 cublasComputeType_t compute, cudaDataType_t scale) {
  absl::StatusOr<CublasTypes> t = GemmTypesFor(dtype, precision);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data, data) << DTypeName(dtype) << " " << MatmulPrecisionName(precision);
  EXPECT_EQ(t->compute, compute) << DTypeName(dtype) << " " << MatmulPrecisionName(precision);
  EXPECT_EQ(t->scale, scale) << DTypeName(dtype) << " " << MatmulPrecisionName(precision);
}

TEST(CublasTypes, F32ComputesInF32UnlessTheSessionAllowsLess) {
  ExpectTypes(DType::kF32, MatmulPrecision::kHighest, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  ExpectTypes(DType::kF32, MatmulPrecision::kHigh, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32,
              CUDA_R_32F);
  ExpectTypes(DType::kF32, MatmulPrecision::kMedium, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_16BF,
              CUDA_R_32F);
}

TEST(CublasTypes, TwoByteOperandsSumInF32AndF64StaysF64AtEveryPrecision) {
  for (MatmulPrecision p :
       {MatmulPrecision::kHighest, MatmulPrecision::kHigh, MatmulPrecision::kMedium}) {
    ExpectTypes(DType::kBF16, p, CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    ExpectTypes(DType::kF16, p, CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    ExpectTypes(DType::kF64, p, CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F);
  }
}

TEST(CublasTypes, IntegerProductsAreNotCublasLts) {
  for (DType d : {DType::kI32, DType::kI64, DType::kU8, DType::kBool}) {
    absl::StatusOr<CublasTypes> t = GemmTypesFor(d, MatmulPrecision::kHighest);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented) << DTypeName(d);
  }
}

}  // namespace
}  // namespace tensord::cuda
