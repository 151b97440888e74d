// The layout ops on a GPU device (RegisterLayoutKernels): the window copies of their shared
// plan (server/ops/layout_plan.h), tril/triu, and pad/pad_backward as one pass per padded dim.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"
#include "server/ops/layout_plan.h"

namespace tensord::gpu {

// One window copy of a plan (ops/layout_plan.h) from `in` to `out`, bits as they are.
absl::Status CopyWindow(DeviceRuntime& device, const Tensor& in, Tensor& out,
                        const ops::WindowCopy& w);

}  // namespace tensord::gpu
