// cuDNN as a CUDA device's convolution library (DeviceRuntime::ConvolutionWorkspace): the three
// passes of a correlation are cuDNN's forward, backward-data and backward-filter convolutions
// (legacy API), dense NC(D)HW tensors, the groups as cuDNN's group count. For each shape the
// algorithms cuDNN's heuristics rank are asked once and kept: only deterministic ones, at full
// precision (f32 without TF32, f64) only those that sum the products as they are (no FFT or
// Winograd transform), in the math the session allows (f32 on FMA units unless its matmul precision
// allows TF32; f16 and bf16 on tensor cores, summing in f32; f64 in f64), the fastest whose
// workspace fits what the caller may have. A pass is enqueued on the calling thread's CUDA stream
// after the work on its blocks.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::cuda {

class CudaDevice;

class CudnnConvolutions {
 public:
  virtual ~CudnnConvolutions() = default;
  // As DeviceRuntime::ConvolutionWorkspace and Convolution.
  virtual absl::StatusOr<std::optional<size_t>> Workspace(const gpu::ConvolutionShape& shape,
                                                          size_t max_workspace) = 0;
  virtual absl::Status Run(const gpu::ConvolutionShape& shape, const void* a, const void* b,
                           void* out, void* workspace, size_t workspace_bytes) = 0;
};

// cuDNN's convolutions on `device`, or null when cuDNN cannot be loaded or TENSORD_CUDNN is "off"
// (the GPU layer's own passes, cuBLASLt's GEMM or direct kernels, run convolutions then).
std::unique_ptr<CudnnConvolutions> MakeCudnnConvolutions(CudaDevice& device);

}  // namespace tensord::cuda
