// The convolutions on an OpenCL device: conv2d, conv3d and conv_transpose2d (conv1d and
// conv_transpose1d through their composites) and their gradients, each a pass of the direct
// correlation kernels of gpu/conv_source.h.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/opencl/opencl_runtime.h"

namespace tensord::opencl {

bool IsConvOp(const std::string& op);
absl::Status RunConv(KernelCall& c, ClDevice& device);

}  // namespace tensord::opencl
