// nonzero, masked_select and masked_select_backward on a GPU device: the chunked scan of
// gpu/select_source.h. The counts are read back once per call (the output size depends on
// them), so these ops synchronise the device's queue, as they do on any GPU.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

bool IsSelectOp(const std::string& op);
absl::Status RunSelect(KernelCall& c, DeviceRuntime& device);

}  // namespace tensord::gpu
