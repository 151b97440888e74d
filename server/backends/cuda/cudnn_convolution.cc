#include "server/backends/cuda/cudnn_convolution.h"

#include <cudnn.h>

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/backends/cuda/cuda_libraries.h"
#include "server/backends/cuda/cuda_runtime.h"
#include "server/backends/cuda/cudnn_types.h"
#include "server/core/status.h"

namespace tensord::cuda {
namespace {

// Shapes whose plans are kept; past it the plans are dropped and made again as used.
constexpr size_t kMaxPlans = 1024;

// One algorithm cuDNN's heuristics offered, in their order (fastest first).
struct Candidate {
  int algo = 0;
  size_t workspace = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

// The descriptors of one shape and the deterministic algorithms for its pass.
struct Plan {
  std::unique_ptr<ConvolutionDescriptors> d;
  std::vector<Candidate> candidates;
  bool f64 = false;
};

// The fastest candidate needing at most `max_workspace` bytes; null when none does.
const Candidate* Choose(const Plan& plan, size_t max_workspace) {
  for (const Candidate& c : plan.candidates) {
    if (c.workspace <= max_workspace) return &c;
  }
  return nullptr;
}

// Whether f32 may run on tensor cores (TF32): where the session's matmul precision allows it.
bool AllowsTf32(const gpu::ConvolutionShape& s) {
  return s.dtype == DType::kF32 && s.precision != MatmulPrecision::kHighest;
}

// What decides a plan: the pass, the dtype, TF32 or not, and the correlation.
std::vector<int64_t> KeyOf(const gpu::ConvolutionShape& s) {
  const nn::Correlation& g = s.g;
  std::vector<int64_t> key = {static_cast<int64_t>(s.pass),
                              static_cast<int64_t>(s.dtype),
                              AllowsTf32(s),
                              g.n,
                              g.groups,
                              g.xc,
                              g.yc,
                              g.cin_g,
                              g.cout_g};
  for (const int64_t* dims : {g.xs, g.ys, g.k, g.stride, g.pad, g.dil}) {
    key.insert(key.end(), dims, dims + 3);
  }
  return key;
}

class Convolutions final : public CudnnConvolutions {
 public:
  Convolutions(const Cudnn& lib, CudaDevice& device) : lib_(lib), device_(device) {}

  absl::StatusOr<std::optional<size_t>> Workspace(const gpu::ConvolutionShape& shape,
                                                  size_t max_workspace) override {
    RETURN_IF_ERROR(device_.StreamAfter({}).status());  // the device current on this thread
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(const Plan* plan, PlanFor(shape));
    if (plan == nullptr) return std::nullopt;
    const Candidate* c = Choose(*plan, max_workspace);
    if (c == nullptr) return std::nullopt;
    return c->workspace;
  }

  absl::Status Run(const gpu::ConvolutionShape& shape, const void* a, const void* b, void* out,
                   void* workspace, size_t workspace_bytes) override {
    ASSIGN_OR_RETURN(cudaStream_t stream, device_.StreamAfter({a, b, out, workspace}));
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(const Plan* plan, PlanFor(shape));
    const Candidate* c = plan == nullptr ? nullptr : Choose(*plan, workspace_bytes);
    if (c == nullptr) {
      return Error(Reason::kInternal,
                   absl::StrCat(device_.name(), ": cuDNN has no algorithm for this convolution"),
                   {{"device", device_.name()}});
    }
    RETURN_IF_ERROR(Check(lib_.SetStream(handle_, stream), "cudnnSetStream"));
    const ConvolutionDescriptors& d = *plan->d;
    RETURN_IF_ERROR(Check(lib_.SetConvolutionMathType(d.conv, c->math), "the math type"));
    const double one64 = 1, zero64 = 0;
    const float one32 = 1, zero32 = 0;
    const void* one = plan->f64 ? static_cast<const void*>(&one64) : &one32;
    const void* zero = plan->f64 ? static_cast<const void*>(&zero64) : &zero32;
    switch (shape.pass) {
      case gpu::ConvPass::kY:  // y = x (a) correlated with w (b)
        return Check(lib_.ConvolutionForward(handle_, one, d.x, a, d.w, b, d.conv,
                                             static_cast<cudnnConvolutionFwdAlgo_t>(c->algo),
                                             workspace, workspace_bytes, zero, d.y, out),
                     "cudnnConvolutionForward");
      case gpu::ConvPass::kX:  // x from y (a) and w (b)
        return Check(
            lib_.ConvolutionBackwardData(handle_, one, d.w, b, d.y, a, d.conv,
                                         static_cast<cudnnConvolutionBwdDataAlgo_t>(c->algo),
                                         workspace, workspace_bytes, zero, d.x, out),
            "cudnnConvolutionBackwardData");
      case gpu::ConvPass::kW:  // w from y (a) and x (b)
        return Check(
            lib_.ConvolutionBackwardFilter(handle_, one, d.x, b, d.y, a, d.conv,
                                           static_cast<cudnnConvolutionBwdFilterAlgo_t>(c->algo),
                                           workspace, workspace_bytes, zero, d.w, out),
            "cudnnConvolutionBackwardFilter");
    }
    return Error(Reason::kInternal, "cuDNN: unknown convolution pass");
  }

 private:
  absl::Status Check(cudnnStatus_t s, const char* what) {
    if (s == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
    return Error(Reason::kInternal,
                 absl::StrCat(device_.name(), ": ", what, " failed (", lib_.GetErrorString(s), ")"),
                 {{"device", device_.name()}});
  }

  // The plan of `shape`, made on first use; null where cuDNN does not take it. The device must
  // be current.
  absl::StatusOr<const Plan*> PlanFor(const gpu::ConvolutionShape& shape)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<int64_t> key = KeyOf(shape);
    if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
    // A cuDNN that loads but cannot make a handle here (a GPU it was not built for) is not
    // used: the convolutions run on the layer's own passes.
    if (handle_ == nullptr && !unusable_ && lib_.Create(&handle_) != CUDNN_STATUS_SUCCESS) {
      handle_ = nullptr;
      unusable_ = true;
    }
    if (unusable_) return nullptr;
    if (plans_.size() >= kMaxPlans) plans_.clear();
    auto plan = std::make_unique<Plan>();
    // A shape cuDNN refuses, or has no deterministic algorithm for, is remembered as null.
    if (!Describe(shape, *plan).ok() || plan->candidates.empty()) plan = nullptr;
    const Plan* kept = plan.get();
    plans_.emplace(std::move(key), std::move(plan));
    return kept;
  }

  // The descriptors and candidates of `shape`; an error where cuDNN refuses the descriptors
  // (the shape then runs on the layer's own passes).
  absl::Status Describe(const gpu::ConvolutionShape& shape, Plan& plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::optional<CudnnTypes> types = ConvolutionTypesFor(shape.dtype, shape.precision);
    const std::optional<CudnnDims> dims = ConvolutionDims(shape.g);
    if (!types.has_value() || !dims.has_value()) return absl::OkStatus();
    plan.f64 = shape.dtype == DType::kF64;
    ASSIGN_OR_RETURN(plan.d, ConvolutionDescriptors::Make(lib_, *types, *dims));
    const bool fma_only = types->fma_only;
    // Full precision: no FFT or Winograd transform either.
    const bool sums_only = fma_only || shape.dtype == DType::kF64;
    const ConvolutionDescriptors& d = *plan.d;
    auto keep = [&](const auto* perf, int count) {
      for (int i = 0; i < count; ++i) {
        const auto& p = perf[i];
        if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC) continue;
        if (sums_only && !SumsProducts(shape.pass, static_cast<int>(p.algo))) continue;
        // Tensor-core math rounds f32 operands to TF32: never for a session that did not ask.
        if (fma_only && p.mathType != CUDNN_FMA_MATH && p.mathType != CUDNN_DEFAULT_MATH) continue;
        plan.candidates.push_back(
            {static_cast<int>(p.algo), p.memory, fma_only ? CUDNN_FMA_MATH : p.mathType});
      }
    };
    // The heuristics' ranking for the pass into `perf`, its candidates kept.
    auto ask = [&](auto& perf, const char* what, auto get) -> absl::Status {
      int count = 0;
      RETURN_IF_ERROR(Check(get(static_cast<int>(std::size(perf)), &count, perf), what));
      keep(perf, count);
      return absl::OkStatus();
    };
    switch (shape.pass) {
      case gpu::ConvPass::kY: {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        return ask(perf, "cudnnGetConvolutionForwardAlgorithm_v7", [&](int n, int* c, auto* p) {
          return lib_.GetForwardAlgorithm(handle_, d.x, d.w, d.conv, d.y, n, c, p);
        });
      }
      case gpu::ConvPass::kX: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        return ask(perf, "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                   [&](int n, int* c, auto* p) {
                     return lib_.GetBackwardDataAlgorithm(handle_, d.w, d.y, d.conv, d.x, n, c, p);
                   });
      }
      case gpu::ConvPass::kW: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        return ask(
            perf, "cudnnGetConvolutionBackwardFilterAlgorithm_v7", [&](int n, int* c, auto* p) {
              return lib_.GetBackwardFilterAlgorithm(handle_, d.x, d.y, d.conv, d.w, n, c, p);
            });
      }
    }
    return absl::OkStatus();
  }

  const Cudnn& lib_;
  CudaDevice& device_;
  absl::Mutex mu_;
  // One handle for the device, its stream set for each pass under mu_.
  cudnnHandle_t handle_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool unusable_ ABSL_GUARDED_BY(mu_) = false;
  // By KeyOf; null for a shape cuDNN does not take.
  absl::flat_hash_map<std::vector<int64_t>, std::unique_ptr<Plan>> plans_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<CudnnConvolutions> MakeCudnnConvolutions(CudaDevice& device) {
  const char* setting = std::getenv("TENSORD_CUDNN");
  if (setting != nullptr && std::string(setting) == "off") return nullptr;
  absl::StatusOr<const Cudnn*> cudnn = LoadCudnn();
  if (!cudnn.ok()) return nullptr;
  return std::make_unique<Convolutions>(**cudnn, device);
}

}  // namespace tensord::cuda
