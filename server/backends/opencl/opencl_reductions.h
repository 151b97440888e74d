// Group ops on an OpenCL device: reductions, scans, softmax and the gradients of reductions,
// each one generated group kernel (server/backends/gpu/reduction_source.h).
#pragma once

#include <string>
#include <vector>

#include "server/backends/backend.h"
#include "server/backends/gpu/reduction_exprs.h"
#include "server/backends/opencl/opencl_runtime.h"

namespace tensord::opencl {

bool IsGroupOp(const std::string& op);
absl::Status RunGroup(KernelCall& c, ClDevice& device);
// One group kernel: `plan`'s indices name elements of `inputs`; `indices`, when given, is the
// second output.
absl::Status LaunchGroup(ClDevice& device, const std::string& op, const gpu::GroupPlan& plan,
                         const std::vector<Tensor>& inputs, Tensor& out, Tensor* indices);

}  // namespace tensord::opencl
