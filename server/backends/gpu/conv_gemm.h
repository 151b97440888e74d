// A convolution's passes through the device's GEMM (cuBLASLt, CLBlast) instead of the direct
// kernels: the patches of a chunk of images become the columns of a matrix (im2col), one
// batched GEMM per chunk multiplies them with the weights, and the input gradient's columns
// are gathered back into the image (col2im). On an NVIDIA GPU this runs on tensor cores; on
// PoCL, CLBlast's GEMM is 2-5x the direct kernels on the CNN's convolutions. The columns of a
// chunk are a temporary charged to the session, at most kConvColumnsBytes (one image at
// least); a session that cannot have them gets the direct kernels.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "server/backends/gpu/codegen/conv_source.h"
#include "server/backends/gpu/device_runtime.h"
#include "server/core/tensor.h"
#include "server/ops/nn_geometry.h"

namespace tensord::gpu {

inline constexpr int64_t kConvColumnsBytes = int64_t{64} << 20;
// One image's columns beyond this, the convolution runs as direct kernels, which need no
// memory of their own.
inline constexpr int64_t kMaxImageColumnsBytes = int64_t{512} << 20;

// Whether ConvThroughGemm runs the passes of `g` in `dtype` on `device`: its GEMM takes the
// dtype, no size of the correlation is zero and one image's columns fit kMaxImageColumnsBytes
// (the others run as direct kernels).
bool ConvTakesGemm(const DeviceRuntime& device, DType dtype, const nn::Correlation& g);

// `pass` of correlation `g` (conv_source.h), its operands a and b in the pass's order:
// out = [bias +] the product; true when it ran. `account` pays for the columns: where its
// quota, its largest tensor or the device's memory refuses them, nothing runs and the result is
// false, for the direct kernels, which need no memory of their own, to run the call.
absl::StatusOr<bool> ConvThroughGemm(DeviceRuntime& device, ConvPass pass, const nn::Correlation& g,
                                     const Tensor& a, const Tensor& b, const Tensor* bias,
                                     Tensor& out, std::shared_ptr<MemoryAccount> account);

// For tests and benches: the direct kernels for every convolution (false), and a smaller bound on a
// chunk's columns (0: kConvColumnsBytes), so that small shapes take several chunks.
void SetConvThroughGemm(bool on, int64_t columns_bytes = 0);

}  // namespace tensord::gpu
