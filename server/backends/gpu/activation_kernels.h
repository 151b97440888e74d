// The activations with a second operand or a dim on a GPU device: prelu (a slope per
// channel) and glu (halves of a dim), and their gradients, from elementwise maps, a group
// kernel (prelu's slope gradient) and window copies (glu's halves).
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

bool IsDimActivation(const std::string& op);
absl::Status RunDimActivation(KernelCall& c, DeviceRuntime& device);

}  // namespace tensord::gpu
