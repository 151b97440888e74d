// cross_entropy's class-index loss on an OpenCL device (cross_entropy_nll and its gradient):
// the targets are read to the host first, because a target out of range is an error the
// call must report before it writes anything; the losses and gradients are group kernels.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/opencl/opencl_runtime.h"

namespace tensord::opencl {

bool IsCrossEntropyOp(const std::string& op);
absl::Status RunCrossEntropy(KernelCall& c, ClDevice& device);

}  // namespace tensord::opencl
