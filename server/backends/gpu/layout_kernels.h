// The layout ops on a GPU device: the window copies of their shared plan
// (server/ops/layout_plan.h), tril/triu, and pad/pad_backward as one pass per padded dim.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"
#include "server/ops/layout_plan.h"

namespace tensord::gpu {

// Every op RunLayout runs.
bool IsLayoutKernelOp(const std::string& op);
// Those of them that move storage bits (every one but pad and pad_backward), so bf16 and f16
// run without a trip through f32.
bool MovesBits(const std::string& op);
absl::Status RunLayout(KernelCall& c, DeviceRuntime& device);
// One window copy of a plan (ops/layout_plan.h) from `in` to `out`, bits as they are.
absl::Status CopyWindow(DeviceRuntime& device, const Tensor& in, Tensor& out,
                        const ops::WindowCopy& w);

}  // namespace tensord::gpu
