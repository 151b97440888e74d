// The CUDA runtime's GEMM: cuBLASLt on the calling session's stream. Row-major C = op(A) op(B) is
// the column-major C^T = op(B)^T op(A)^T, so B's data is cuBLASLt's first operand. f32 computes in
// f32 (TF32 only when a call asks for it, which none does yet), f64 in f64.
#include <cublasLt.h>

#include "absl/strings/str_cat.h"
#include "server/backends/cuda/cuda_libraries.h"
#include "server/backends/cuda/cuda_runtime.h"
#include "server/core/status.h"
#include "server/core/stream_scope.h"

namespace tensord::cuda {
namespace {

constexpr size_t kWorkspace = 32 << 20;

// Destroys what it holds at scope exit.
template <typename T, typename D>
struct Owned {
  T value = nullptr;
  D destroy;
  ~Owned() {
    if (value != nullptr) destroy(value);
  }
};

}  // namespace

absl::Status CudaDevice::Gemm(const gpu::GemmShape& g, const void* a, const void* b, void* c) {
  RETURN_IF_ERROR(Enter());
  ASSIGN_OR_RETURN(const CublasLt* lt, LoadCublasLt());
  auto failed = [&](cublasStatus_t s, const char* what) {
    return Error(
        Reason::kInternal,
        absl::StrCat(name_, ": cuBLASLt ", what, " failed (status ", static_cast<int>(s), ")"),
        {{"device", name_}});
  };
  absl::MutexLock lock(&gemm_mu_);
  if (cublaslt_ == nullptr) {
    cublasLtHandle_t handle = nullptr;
    cublasStatus_t s = lt->Create(&handle);
    if (s != CUBLAS_STATUS_SUCCESS) return failed(s, "cublasLtCreate");
    cublaslt_ = handle;
    RETURN_IF_ERROR(Check(cudaMalloc(&workspace_, kWorkspace), "the GEMM workspace"));
    workspace_bytes_ = kWorkspace;
    // One workspace for every stream: a GEMM waits for the stream of the GEMM before it.
    RETURN_IF_ERROR(order_.Allocated(workspace_, StreamScope::Current()));
  }
  ASSIGN_OR_RETURN(cudaStream_t stream, StreamFor({a, b, c, workspace_}));
  const bool f64 = g.dtype == DType::kF64;
  const cudaDataType_t type = f64 ? CUDA_R_64F : CUDA_R_32F;
  Owned<cublasLtMatmulDesc_t, decltype(lt->MatmulDescDestroy)> desc{nullptr, lt->MatmulDescDestroy};
  cublasStatus_t s =
      lt->MatmulDescCreate(&desc.value, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, type);
  if (s != CUBLAS_STATUS_SUCCESS) return failed(s, "cublasLtMatmulDescCreate");
  const cublasOperation_t op_b = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // first operand
  const cublasOperation_t op_a = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // second operand
  lt->MatmulDescSetAttribute(desc.value, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b));
  lt->MatmulDescSetAttribute(desc.value, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a));
  using Layout = Owned<cublasLtMatrixLayout_t, decltype(lt->MatrixLayoutDestroy)>;
  Layout first{nullptr, lt->MatrixLayoutDestroy}, second{nullptr, lt->MatrixLayoutDestroy},
      out{nullptr, lt->MatrixLayoutDestroy};
  // Column-major views of the row-major operands.
  const uint64_t b_rows = g.transpose_b ? g.inner : g.cols,
                 b_cols = g.transpose_b ? g.cols : g.inner;
  const uint64_t a_rows = g.transpose_a ? g.rows : g.inner,
                 a_cols = g.transpose_a ? g.inner : g.rows;
  if ((s = lt->MatrixLayoutCreate(&first.value, type, b_rows, b_cols, b_rows)) != 0 ||
      (s = lt->MatrixLayoutCreate(&second.value, type, a_rows, a_cols, a_rows)) != 0 ||
      (s = lt->MatrixLayoutCreate(&out.value, type, g.cols, g.rows, g.cols)) != 0) {
    return failed(s, "cublasLtMatrixLayoutCreate");
  }
  const int32_t batch = static_cast<int32_t>(g.batch);
  const int64_t strides[3] = {static_cast<int64_t>(g.b_stride), static_cast<int64_t>(g.a_stride),
                              static_cast<int64_t>(g.rows * g.cols)};
  const cublasLtMatrixLayout_t layouts[3] = {first.value, second.value, out.value};
  for (int i = 0; i < 3; ++i) {
    lt->MatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                 sizeof(batch));
    lt->MatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                 &strides[i], sizeof(strides[i]));
  }
  Owned<cublasLtMatmulPreference_t, decltype(lt->MatmulPreferenceDestroy)> pref{
      nullptr, lt->MatmulPreferenceDestroy};
  if ((s = lt->MatmulPreferenceCreate(&pref.value)) != 0) {
    return failed(s, "cublasLtMatmulPreferenceCreate");
  }
  lt->MatmulPreferenceSetAttribute(pref.value, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                   &workspace_bytes_, sizeof(workspace_bytes_));
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  s = lt->MatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(cublaslt_), desc.value, first.value,
                                 second.value, out.value, out.value, pref.value, 1, &heuristic,
                                 &found);
  if (s != CUBLAS_STATUS_SUCCESS || found == 0) return failed(s, "cublasLtMatmulAlgoGetHeuristic");
  const double one64 = 1, zero64 = 0;
  const float one32 = 1, zero32 = 0;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
  s = lt->Matmul(static_cast<cublasLtHandle_t>(cublaslt_), desc.value, alpha, b, first.value, a,
                 second.value, beta, c, out.value, c, out.value, &heuristic.algo, workspace_,
                 workspace_bytes_, stream);
  if (s != CUBLAS_STATUS_SUCCESS) return failed(s, "cublasLtMatmul");
  return absl::OkStatus();
}

}  // namespace tensord::cuda
