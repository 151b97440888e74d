// conv2d and its gradients on an OpenCL device, as the direct kernels of gpu/conv_source.h
// (conv1d reaches them through its composite).
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/opencl/opencl_runtime.h"

namespace tensord::opencl {

bool IsConvOp(const std::string& op);
absl::Status RunConv(KernelCall& c, ClDevice& device);

}  // namespace tensord::opencl
