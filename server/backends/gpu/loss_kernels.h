// The pointwise parts of the losses (l1, binary cross entropy with and without logits, smooth
// l1, huber, kl_div) and their gradients on a GPU device: one elementwise map per output,
// computed in double (gpu/loss_exprs.h), so they need fp64.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

bool IsPointwiseLossOp(const std::string& op);
absl::Status RunPointwiseLoss(KernelCall& c, DeviceRuntime& device);

}  // namespace tensord::gpu
