// The creation ops that compute their values (arange, eye) and the random ones (rand, randn,
// native_dropout) on an OpenCL device (gpu/creation_source.h). They compute in double, so they
// need a device with fp64.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/opencl/opencl_runtime.h"

namespace tensord::opencl {

bool IsComputedCreationOp(const std::string& op);
absl::Status RunComputedCreation(KernelCall& c, ClDevice& device);

}  // namespace tensord::opencl
