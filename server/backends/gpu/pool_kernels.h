// The 2-d pools (max_pool2d, avg_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d) and their
// gradients on a GPU device: the windows of ops/nn_pool_windows.h run by the kernels of
// gpu/pool_source.h.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

bool IsPoolOp(const std::string& op);
absl::Status RunPool(KernelCall& c, DeviceRuntime& device);

}  // namespace tensord::gpu
