// layer_norm, native_batch_norm (batch_norm's kernel) and their gradients on an OpenCL
// device, as group kernels (gpu/norm_exprs.h). layer_norm: the input's gradient per row, the
// parameters' per column after a pass that writes each row's mean and rstd. batch_norm: every
// output a pass over the channels.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/opencl/opencl_runtime.h"

namespace tensord::opencl {

bool IsNormOp(const std::string& op);
absl::Status RunNorm(KernelCall& c, ClDevice& device);

}  // namespace tensord::opencl
