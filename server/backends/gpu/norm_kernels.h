// layer_norm, native_batch_norm (batch_norm's kernel) and their gradients on a GPU
// device, as group kernels (gpu/norm_exprs.h). layer_norm: the input's gradient per row, the
// parameters' per column after a pass that writes each row's mean and rstd. batch_norm: every
// output a pass over the channels.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

bool IsNormOp(const std::string& op);
absl::Status RunNorm(KernelCall& c, DeviceRuntime& device);

}  // namespace tensord::gpu
