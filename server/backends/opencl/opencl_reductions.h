// Group ops on an OpenCL device: reductions, scans, softmax and the gradients of reductions,
// each one generated group kernel (server/backends/gpu/reduction_source.h).
#pragma once

#include "server/backends/backend.h"
#include "server/backends/opencl/opencl_runtime.h"

namespace tensord::opencl {

bool IsGroupOp(const std::string& op);
absl::Status RunGroup(KernelCall& c, ClDevice& device);

}  // namespace tensord::opencl
