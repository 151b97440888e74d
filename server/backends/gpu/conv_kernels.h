// The convolutions on a GPU device: conv2d, conv3d and conv_transpose2d (conv1d and
// conv_transpose1d through their composites) and their gradients, each a pass of the direct
// correlation kernels of gpu/conv_source.h.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

bool IsConvOp(const std::string& op);
absl::Status RunConv(KernelCall& c, DeviceRuntime& device);

}  // namespace tensord::gpu
