// upsample (interpolate's internal op) and its gradient on an OpenCL device: the taps of
// ops/nn_resample_taps.h run by the kernels of gpu/resample_source.h.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/opencl/opencl_runtime.h"

namespace tensord::opencl {

bool IsResampleOp(const std::string& op);
absl::Status RunResample(KernelCall& c, ClDevice& device);

}  // namespace tensord::opencl
