// A convolution's pass through the vendor's convolution library where the device's runtime has
// one (cuDNN on CUDA: DeviceRuntime::ConvolutionWorkspace): the library picks a deterministic
// algorithm for the shape, its workspace is a temporary charged to the session, and the bias is
// added after the product as on the GEMM path (conv_gemm.h). Where the runtime has no library,
// the library does not take the shape or the session has no room for the workspace, nothing
// runs and the GPU layer's own passes (GEMM, then direct kernels) run the call.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "server/backends/gpu/codegen/conv_source.h"
#include "server/backends/gpu/device_runtime.h"
#include "server/core/tensor.h"
#include "server/ops/nn_geometry.h"

namespace tensord::gpu {

// The largest workspace a pass asks for (cuDNN's fastest algorithms for large convolutions want a
// few hundred MiB); less where the session may not hold a tensor that large.
inline constexpr size_t kMaxConvWorkspaceBytes = size_t{1} << 30;

// `pass` of correlation `g`, its operands a and b in the pass's order: out = [bias +] the
// product; true when it ran, false where the library is not used for it (above).
absl::StatusOr<bool> ConvThroughLibrary(DeviceRuntime& device, ConvPass pass,
                                        const nn::Correlation& g, const Tensor& a, const Tensor& b,
                                        const Tensor* bias, Tensor& out,
                                        std::shared_ptr<MemoryAccount> account);

// Passes run through a device's library since the process started (tests see which path ran).
int64_t ConvLibraryRuns();

// For tests and benches: whether a device's convolution library is used at all (on by default;
// TENSORD_CONV_LIBRARY=off turns it off for the process).
void SetConvThroughLibrary(bool on);

}  // namespace tensord::gpu
