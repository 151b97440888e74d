// cross_entropy's class-index loss on a GPU device (cross_entropy_nll and its gradient):
// the targets are read to the host first, because a target out of range is an error the
// call must report before it writes anything; the losses and gradients are group kernels.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

bool IsCrossEntropyOp(const std::string& op);
absl::Status RunCrossEntropy(KernelCall& c, DeviceRuntime& device);

}  // namespace tensord::gpu
