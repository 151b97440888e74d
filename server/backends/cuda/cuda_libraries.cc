#include "server/backends/cuda/cuda_libraries.h"

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"

namespace tensord::cuda {
namespace {

// `names` tried in order; the handle stays open for the process.
absl::StatusOr<void*> Open(std::initializer_list<const char*> names) {
  std::string errors;
  for (const char* name : names) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", dlerror());
  }
  return Error(Reason::kInternal, absl::StrCat("cuda: cannot load ", *names.begin(), ": ", errors));
}

template <typename F>
absl::Status Bind(void* handle, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(handle, symbol));
  if (out == nullptr) {
    return Error(Reason::kInternal, absl::StrCat("cuda: symbol ", symbol, " missing"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Nvrtc> BindNvrtc() {
  ASSIGN_OR_RETURN(void* h, Open({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}));
  Nvrtc n;
  RETURN_IF_ERROR(Bind(h, "nvrtcVersion", n.Version));
  RETURN_IF_ERROR(Bind(h, "nvrtcGetErrorString", n.GetErrorString));
  RETURN_IF_ERROR(Bind(h, "nvrtcCreateProgram", n.CreateProgram));
  RETURN_IF_ERROR(Bind(h, "nvrtcCompileProgram", n.CompileProgram));
  RETURN_IF_ERROR(Bind(h, "nvrtcGetProgramLogSize", n.GetProgramLogSize));
  RETURN_IF_ERROR(Bind(h, "nvrtcGetProgramLog", n.GetProgramLog));
  RETURN_IF_ERROR(Bind(h, "nvrtcGetCUBINSize", n.GetCUBINSize));
  RETURN_IF_ERROR(Bind(h, "nvrtcGetCUBIN", n.GetCUBIN));
  RETURN_IF_ERROR(Bind(h, "nvrtcDestroyProgram", n.DestroyProgram));
  n.Version(&n.major, &n.minor);
  return n;
}

absl::StatusOr<CublasLt> BindCublasLt() {
  ASSIGN_OR_RETURN(void* h, Open({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}));
  CublasLt c;
  RETURN_IF_ERROR(Bind(h, "cublasLtCreate", c.Create));
  RETURN_IF_ERROR(Bind(h, "cublasLtDestroy", c.Destroy));
  RETURN_IF_ERROR(Bind(h, "cublasLtMatmulDescCreate", c.MatmulDescCreate));
  RETURN_IF_ERROR(Bind(h, "cublasLtMatmulDescDestroy", c.MatmulDescDestroy));
  RETURN_IF_ERROR(Bind(h, "cublasLtMatmulDescSetAttribute", c.MatmulDescSetAttribute));
  RETURN_IF_ERROR(Bind(h, "cublasLtMatrixLayoutCreate", c.MatrixLayoutCreate));
  RETURN_IF_ERROR(Bind(h, "cublasLtMatrixLayoutDestroy", c.MatrixLayoutDestroy));
  RETURN_IF_ERROR(Bind(h, "cublasLtMatrixLayoutSetAttribute", c.MatrixLayoutSetAttribute));
  RETURN_IF_ERROR(Bind(h, "cublasLtMatmulPreferenceCreate", c.MatmulPreferenceCreate));
  RETURN_IF_ERROR(Bind(h, "cublasLtMatmulPreferenceDestroy", c.MatmulPreferenceDestroy));
  RETURN_IF_ERROR(Bind(h, "cublasLtMatmulPreferenceSetAttribute", c.MatmulPreferenceSetAttribute));
  RETURN_IF_ERROR(Bind(h, "cublasLtMatmulAlgoGetHeuristic", c.MatmulAlgoGetHeuristic));
  RETURN_IF_ERROR(Bind(h, "cublasLtMatmul", c.Matmul));
  return c;
}

absl::StatusOr<Cudnn> BindCudnn() {
  // The front library: it loads the sub-libraries (cnn, ops, engines) it needs itself.
  ASSIGN_OR_RETURN(void* h, Open({"libcudnn.so.9", "libcudnn.so"}));
  Cudnn c;
  RETURN_IF_ERROR(Bind(h, "cudnnGetVersion", c.GetVersion));
  RETURN_IF_ERROR(Bind(h, "cudnnGetErrorString", c.GetErrorString));
  RETURN_IF_ERROR(Bind(h, "cudnnCreate", c.Create));
  RETURN_IF_ERROR(Bind(h, "cudnnSetStream", c.SetStream));
  RETURN_IF_ERROR(Bind(h, "cudnnCreateTensorDescriptor", c.CreateTensorDescriptor));
  RETURN_IF_ERROR(Bind(h, "cudnnDestroyTensorDescriptor", c.DestroyTensorDescriptor));
  RETURN_IF_ERROR(Bind(h, "cudnnSetTensorNdDescriptor", c.SetTensorNdDescriptor));
  RETURN_IF_ERROR(Bind(h, "cudnnCreateFilterDescriptor", c.CreateFilterDescriptor));
  RETURN_IF_ERROR(Bind(h, "cudnnDestroyFilterDescriptor", c.DestroyFilterDescriptor));
  RETURN_IF_ERROR(Bind(h, "cudnnSetFilterNdDescriptor", c.SetFilterNdDescriptor));
  RETURN_IF_ERROR(Bind(h, "cudnnCreateConvolutionDescriptor", c.CreateConvolutionDescriptor));
  RETURN_IF_ERROR(Bind(h, "cudnnDestroyConvolutionDescriptor", c.DestroyConvolutionDescriptor));
  RETURN_IF_ERROR(Bind(h, "cudnnSetConvolutionNdDescriptor", c.SetConvolutionNdDescriptor));
  RETURN_IF_ERROR(Bind(h, "cudnnSetConvolutionGroupCount", c.SetConvolutionGroupCount));
  RETURN_IF_ERROR(Bind(h, "cudnnSetConvolutionMathType", c.SetConvolutionMathType));
  RETURN_IF_ERROR(Bind(h, "cudnnGetConvolutionNdForwardOutputDim", c.GetForwardOutputDim));
  RETURN_IF_ERROR(Bind(h, "cudnnGetConvolutionForwardAlgorithm_v7", c.GetForwardAlgorithm));
  RETURN_IF_ERROR(
      Bind(h, "cudnnGetConvolutionBackwardDataAlgorithm_v7", c.GetBackwardDataAlgorithm));
  RETURN_IF_ERROR(
      Bind(h, "cudnnGetConvolutionBackwardFilterAlgorithm_v7", c.GetBackwardFilterAlgorithm));
  RETURN_IF_ERROR(Bind(h, "cudnnConvolutionForward", c.ConvolutionForward));
  RETURN_IF_ERROR(Bind(h, "cudnnConvolutionBackwardData", c.ConvolutionBackwardData));
  RETURN_IF_ERROR(Bind(h, "cudnnConvolutionBackwardFilter", c.ConvolutionBackwardFilter));
  c.version = c.GetVersion();
  // The legacy API as this build declares it (cudnn 9's headers).
  if (c.version < 90000) {
    return Error(Reason::kInternal, absl::StrCat("cuda: cuDNN ", c.version,
                                                 " is older than 9.0, which tensord needs"));
  }
  return c;
}

absl::StatusOr<Nccl> BindNccl() {
  ASSIGN_OR_RETURN(void* h, Open({"libnccl.so.2", "libnccl.so"}));
  Nccl n;
  RETURN_IF_ERROR(Bind(h, "ncclGetVersion", n.GetVersion));
  RETURN_IF_ERROR(Bind(h, "ncclGetErrorString", n.GetErrorString));
  RETURN_IF_ERROR(Bind(h, "ncclGetLastError", n.GetLastError));
  RETURN_IF_ERROR(Bind(h, "ncclGetUniqueId", n.GetUniqueId));
  RETURN_IF_ERROR(Bind(h, "ncclCommInitRankConfig", n.CommInitRankConfig));
  RETURN_IF_ERROR(Bind(h, "ncclCommGetAsyncError", n.CommGetAsyncError));
  RETURN_IF_ERROR(Bind(h, "ncclCommAbort", n.CommAbort));
  RETURN_IF_ERROR(Bind(h, "ncclAllReduce", n.AllReduce));
  RETURN_IF_ERROR(Bind(h, "ncclAllGather", n.AllGather));
  RETURN_IF_ERROR(Bind(h, "ncclReduceScatter", n.ReduceScatter));
  RETURN_IF_ERROR(Bind(h, "ncclBroadcast", n.Broadcast));
  RETURN_IF_ERROR(Bind(h, "ncclReduce", n.Reduce));
  n.GetVersion(&n.version);
  // The configuration this build passes (ncclConfig_t) is read by 2.14 and later.
  if (n.version < 21400) {
    return Error(Reason::kInternal, absl::StrCat("cuda: NCCL ", n.version,
                                                 " is older than 2.14, which tensord needs"));
  }
  return n;
}

}  // namespace

absl::StatusOr<const Nvrtc*> LoadNvrtc() {
  static const absl::StatusOr<Nvrtc>* loaded = new absl::StatusOr<Nvrtc>(BindNvrtc());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

absl::StatusOr<const CublasLt*> LoadCublasLt() {
  static const absl::StatusOr<CublasLt>* loaded = new absl::StatusOr<CublasLt>(BindCublasLt());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

absl::StatusOr<const Cudnn*> LoadCudnn() {
  static const absl::StatusOr<Cudnn>* loaded = new absl::StatusOr<Cudnn>(BindCudnn());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

absl::StatusOr<const Nccl*> LoadNccl() {
  static const absl::StatusOr<Nccl>* loaded = new absl::StatusOr<Nccl>(BindNccl());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

}  // namespace tensord::cuda
