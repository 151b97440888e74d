// NVRTC and cuBLASLt, loaded when the first CUDA device opens (dlopen), so a server built with
// CUDA starts, and serves its other devices, on a machine without them or without a GPU; only
// the CUDA runtime (linked statically, it loads the driver itself) is always there.
#pragma once

#include <cublasLt.h>
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

// Loaded once; INTERNAL naming the library when it or a symbol is missing.
absl::StatusOr<const Nvrtc*> LoadNvrtc();
absl::StatusOr<const CublasLt*> LoadCublasLt();

}  // namespace tensord::cuda
