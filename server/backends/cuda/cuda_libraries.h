// NVRTC and cuBLASLt, loaded when the first CUDA device opens, cuDNN at a device's first
// convolution, and NCCL at a process group's first collective on a CUDA device (dlopen), so a
// server built with CUDA starts, and serves its other devices, on a machine without them or without
// a GPU; only the CUDA runtime (linked statically, it loads the driver itself) is always there.
#pragma once

#include <cublasLt.h>
#include <cudnn.h>
#include <nccl.h>
#include <nvrtc.h>

#include "absl/status/statusor.h"

namespace tensord::cuda {

struct Nvrtc {
  decltype(&nvrtcVersion) Version;
  decltype(&nvrtcGetErrorString) GetErrorString;
  decltype(&nvrtcCreateProgram) CreateProgram;
  decltype(&nvrtcCompileProgram) CompileProgram;
  decltype(&nvrtcGetProgramLogSize) GetProgramLogSize;
  decltype(&nvrtcGetProgramLog) GetProgramLog;
  decltype(&nvrtcGetCUBINSize) GetCUBINSize;
  decltype(&nvrtcGetCUBIN) GetCUBIN;
  decltype(&nvrtcDestroyProgram) DestroyProgram;
  int major = 0, minor = 0;  // its version
};

struct CublasLt {
  decltype(&cublasLtCreate) Create;
  decltype(&cublasLtDestroy) Destroy;
  decltype(&cublasLtMatmulDescCreate) MatmulDescCreate;
  decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy;
  decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
  decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
  decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
  decltype(&cublasLtMatrixLayoutSetAttribute) MatrixLayoutSetAttribute;
  decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
  decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
  decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
  decltype(&cublasLtMatmul) Matmul;
};

// cuDNN's legacy convolution API (cudnn_cnn.h) and the descriptors it takes.
struct Cudnn {
  decltype(&cudnnGetVersion) GetVersion;
  decltype(&cudnnGetErrorString) GetErrorString;
  decltype(&cudnnCreate) Create;
  decltype(&cudnnSetStream) SetStream;
  decltype(&cudnnCreateTensorDescriptor) CreateTensorDescriptor;
  decltype(&cudnnDestroyTensorDescriptor) DestroyTensorDescriptor;
  decltype(&cudnnSetTensorNdDescriptor) SetTensorNdDescriptor;
  decltype(&cudnnCreateFilterDescriptor) CreateFilterDescriptor;
  decltype(&cudnnDestroyFilterDescriptor) DestroyFilterDescriptor;
  decltype(&cudnnSetFilterNdDescriptor) SetFilterNdDescriptor;
  decltype(&cudnnCreateConvolutionDescriptor) CreateConvolutionDescriptor;
  decltype(&cudnnDestroyConvolutionDescriptor) DestroyConvolutionDescriptor;
  decltype(&cudnnSetConvolutionNdDescriptor) SetConvolutionNdDescriptor;
  decltype(&cudnnSetConvolutionGroupCount) SetConvolutionGroupCount;
  decltype(&cudnnSetConvolutionMathType) SetConvolutionMathType;
  decltype(&cudnnGetConvolutionNdForwardOutputDim) GetForwardOutputDim;
  decltype(&cudnnGetConvolutionForwardAlgorithm_v7) GetForwardAlgorithm;
  decltype(&cudnnGetConvolutionBackwardDataAlgorithm_v7) GetBackwardDataAlgorithm;
  decltype(&cudnnGetConvolutionBackwardFilterAlgorithm_v7) GetBackwardFilterAlgorithm;
  decltype(&cudnnConvolutionForward) ConvolutionForward;
  decltype(&cudnnConvolutionBackwardData) ConvolutionBackwardData;
  decltype(&cudnnConvolutionBackwardFilter) ConvolutionBackwardFilter;
  size_t version = 0;  // CUDNN_VERSION of the library loaded
};

struct Nccl {
  decltype(&ncclGetVersion) GetVersion;
  decltype(&ncclGetErrorString) GetErrorString;
  decltype(&ncclGetLastError) GetLastError;
  decltype(&ncclGetUniqueId) GetUniqueId;
  decltype(&ncclCommInitRankConfig) CommInitRankConfig;
  decltype(&ncclCommGetAsyncError) CommGetAsyncError;
  decltype(&ncclCommAbort) CommAbort;
  decltype(&ncclAllReduce) AllReduce;
  decltype(&ncclAllGather) AllGather;
  decltype(&ncclReduceScatter) ReduceScatter;
  decltype(&ncclBroadcast) Broadcast;
  decltype(&ncclReduce) Reduce;
  int version = 0;  // NCCL_VERSION_CODE of the library loaded
};

// Loaded once; INTERNAL naming the library when it or a symbol is missing.
absl::StatusOr<const Nvrtc*> LoadNvrtc();
absl::StatusOr<const CublasLt*> LoadCublasLt();
absl::StatusOr<const Cudnn*> LoadCudnn();
absl::StatusOr<const Nccl*> LoadNccl();

}  // namespace tensord::cuda
