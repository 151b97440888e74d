// The cuBLASLt types of a GEMM: its operands' data type, the compute type and the type of its
// scalars, from the tensors' dtype and the session's float32 matmul precision
// (server/core/matmul_precision.h). bf16 and f16 operands compute in f32 on tensor cores
// (each product exact, the sums in f32, the result rounded once), as PyTorch's do; f32 computes
// in f32 unless the session allows TensorFloat-32 ("high") or bfloat16 ("medium") products.
#pragma once

#include <cublasLt.h>

#include "absl/status/statusor.h"
#include "server/core/dtype.h"
#include "server/core/matmul_precision.h"

namespace tensord::cuda {

struct CublasTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;
};

// UNSUPPORTED_ON_BACKEND for a dtype cuBLASLt's GEMM is not used for here.
absl::StatusOr<CublasTypes> GemmTypesFor(DType dtype, MatmulPrecision precision);

}  // namespace tensord::cuda
