// The creation ops that compute their values (arange, eye) and the random ones (rand, randn,
// native_dropout) on a GPU device (gpu/creation_source.h). They compute in double, so they
// need a device with fp64.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

bool IsComputedCreationOp(const std::string& op);
absl::Status RunComputedCreation(KernelCall& c, DeviceRuntime& device);

}  // namespace tensord::gpu
