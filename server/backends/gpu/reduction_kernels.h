// Group ops on a GPU device: reductions, scans, softmax and the gradients of reductions,
// each one generated group kernel (server/backends/gpu/codegen/reduction_source.h).
#pragma once

#include <string>
#include <vector>

#include "server/backends/backend.h"
#include "server/backends/gpu/codegen/reduction_exprs.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

// One group kernel: `plan`'s indices name elements of `inputs`; `indices`, when given, is the
// second output.
absl::Status LaunchGroup(DeviceRuntime& device, const std::string& op, const gpu::GroupPlan& plan,
                         const std::vector<Tensor>& inputs, Tensor& out, Tensor* indices);

}  // namespace tensord::gpu
