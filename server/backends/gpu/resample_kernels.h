// upsample (interpolate's internal op) and its gradient on a GPU device: the taps of
// ops/nn_resample_taps.h run by the kernels of gpu/resample_source.h.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

bool IsResampleOp(const std::string& op);
absl::Status RunResample(KernelCall& c, DeviceRuntime& device);

}  // namespace tensord::gpu
