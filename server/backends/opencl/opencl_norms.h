// layer_norm and layer_norm_backward on an OpenCL device, as group kernels (gpu/norm_exprs.h):
// the input's gradient per row, the parameters' gradients per column after a pass that writes
// each row's mean and rstd.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/opencl/opencl_runtime.h"

namespace tensord::opencl {

bool IsNormOp(const std::string& op);
absl::Status RunNorm(KernelCall& c, ClDevice& device);

}  // namespace tensord::opencl
