// The CUDA runtime's GEMM: cuBLASLt on the calling session's stream. Row-major C = op(A) op(B) is
// the column-major C^T = op(B)^T op(A)^T, so B's data is cuBLASLt's first operand, and a bias
// per column of C is cuBLASLt's bias per row of C^T (its BIAS epilogue: added to the f32 sums
// before the one rounding to C's dtype). Types: cublas_types.h.
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/cuda/cublas_types.h"
#include "server/backends/cuda/cuda_libraries.h"
#include "server/backends/cuda/cuda_runtime.h"
#include "server/core/status.h"
#include "server/core/stream_scope.h"

namespace tensord::cuda {
namespace {

constexpr size_t kWorkspace = 32 << 20;
// Shapes whose algorithm is kept; past it the table starts again.
constexpr size_t kMaxGemmAlgos = 4096;

// Destroys what it holds at scope exit.
template <typename T, typename D>
struct Owned {
  T value = nullptr;
  D destroy;
  ~Owned() {
    if (value != nullptr) destroy(value);
  }
};

// The largest power of two up to 256 that divides the address.
uint32_t Alignment(const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

}  // namespace

absl::StatusOr<CublasTypes> GemmTypesFor(DType dtype, MatmulPrecision precision) {
  switch (dtype) {
    case DType::kF64:
      return CublasTypes{CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    case DType::kF32:
      switch (precision) {
        case MatmulPrecision::kHigh:
          return CublasTypes{CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F};
        case MatmulPrecision::kMedium:
          return CublasTypes{CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_16BF, CUDA_R_32F};
        case MatmulPrecision::kHighest:
          break;
      }
      return CublasTypes{CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::kBF16:
      return CublasTypes{CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::kF16:
      return CublasTypes{CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    default:
      break;
  }
  return Error(Reason::kUnsupportedOnBackend,
               absl::StrCat("GEMM: cuBLASLt is not used for ", DTypeName(dtype)),
               {{"dtype", std::string(DTypeName(dtype))}, {"backend", "cuda"}});
}

bool CudaDevice::GemmTakes(DType dtype) const {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kBF16 ||
         dtype == DType::kF16;
}

absl::Status CudaDevice::Gemm(const gpu::GemmShape& g, const void* a, const void* b, void* c,
                              const void* bias) {
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
  ASSIGN_OR_RETURN(const CublasTypes types, GemmTypesFor(g.dtype, g.precision));
  ASSIGN_OR_RETURN(cudaStream_t stream, StreamFor({a, b, c, bias, workspace_}));
  const cudaDataType_t type = types.data;
  Owned<cublasLtMatmulDesc_t, decltype(lt->MatmulDescDestroy)> desc{nullptr, lt->MatmulDescDestroy};
  cublasStatus_t s = lt->MatmulDescCreate(&desc.value, types.compute, types.scale);
  if (s != CUBLAS_STATUS_SUCCESS) return failed(s, "cublasLtMatmulDescCreate");
  const cublasOperation_t op_b = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // first operand
  const cublasOperation_t op_a = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // second operand
  lt->MatmulDescSetAttribute(desc.value, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b));
  lt->MatmulDescSetAttribute(desc.value, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a));
  if (bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    if ((s = lt->MatmulDescSetAttribute(desc.value, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                        sizeof(epilogue))) != 0 ||
        (s = lt->MatmulDescSetAttribute(desc.value, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                        sizeof(bias))) != 0) {
      return failed(s, "cublasLtMatmulDescSetAttribute (bias)");
    }
  }
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
  // The views' first elements (a block here is a device pointer), and how they are aligned: the
  // heuristic assumes 256 bytes unless told less, and a view inside a block may be aligned to
  // its element only.
  const size_t size = DTypeSize(g.dtype);
  const void* a_at = static_cast<const char*>(a) + g.a_offset * size;
  const void* b_at = static_cast<const char*>(b) + g.b_offset * size;
  void* c_at = static_cast<char*>(c) + g.c_offset * size;
  const uint32_t alignments[3] = {Alignment(b_at), Alignment(a_at), Alignment(c_at)};
  // The heuristic's algorithm, asked once per shape: everything the query is given.
  const std::vector<int64_t> key = {static_cast<int64_t>(types.data),
                                    static_cast<int64_t>(types.compute),
                                    g.transpose_a,
                                    g.transpose_b,
                                    static_cast<int64_t>(g.rows),
                                    static_cast<int64_t>(g.cols),
                                    static_cast<int64_t>(g.inner),
                                    static_cast<int64_t>(g.batch),
                                    static_cast<int64_t>(g.a_stride),
                                    static_cast<int64_t>(g.b_stride),
                                    bias != nullptr,
                                    alignments[0],
                                    alignments[1],
                                    alignments[2]};
  cublasLtMatmulAlgo_t algo;
  static_assert(sizeof(algo) == sizeof(GemmAlgo));
  if (auto it = gemm_algos_.find(key); it != gemm_algos_.end()) {
    std::memcpy(&algo, it->second.data(), sizeof(algo));
  } else {
    Owned<cublasLtMatmulPreference_t, decltype(lt->MatmulPreferenceDestroy)> pref{
        nullptr, lt->MatmulPreferenceDestroy};
    if ((s = lt->MatmulPreferenceCreate(&pref.value)) != 0) {
      return failed(s, "cublasLtMatmulPreferenceCreate");
    }
    lt->MatmulPreferenceSetAttribute(pref.value, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                     &workspace_bytes_, sizeof(workspace_bytes_));
    const cublasLtMatmulPreferenceAttributes_t aligned[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i) {
      lt->MatmulPreferenceSetAttribute(pref.value, aligned[i], &alignments[std::min(i, 2)],
                                       sizeof(uint32_t));
    }
    if (IsLowPrecision(g.dtype)) {
      // A sum split over the inner dim is added up in f32, never in the 2-byte output.
      const uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      lt->MatmulPreferenceSetAttribute(pref.value, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                       &reductions, sizeof(reductions));
    }
    cublasLtMatmulHeuristicResult_t heuristic = {};
    int found = 0;
    s = lt->MatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(cublaslt_), desc.value,
                                   first.value, second.value, out.value, out.value, pref.value, 1,
                                   &heuristic, &found);
    if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
      return failed(s, "cublasLtMatmulAlgoGetHeuristic");
    }
    algo = heuristic.algo;
    if (gemm_algos_.size() >= kMaxGemmAlgos) gemm_algos_.clear();
    GemmAlgo kept;
    std::memcpy(kept.data(), &algo, sizeof(algo));
    gemm_algos_.emplace(key, kept);
  }
  const double one64 = 1, zero64 = 0;
  const float one32 = 1, zero32 = 0;
  const bool f64 = types.scale == CUDA_R_64F;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? (g.accumulate ? &one64 : &zero64)
                         : static_cast<const void*>(g.accumulate ? &one32 : &zero32);
  s = lt->Matmul(static_cast<cublasLtHandle_t>(cublaslt_), desc.value, alpha, b_at, first.value,
                 a_at, second.value, beta, c_at, out.value, c_at, out.value, &algo, workspace_,
                 workspace_bytes_, stream);
  if (s != CUBLAS_STATUS_SUCCESS) return failed(s, "cublasLtMatmul");
  return absl::OkStatus();
}

}  // namespace tensord::cuda
