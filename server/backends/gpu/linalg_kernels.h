#pragma once

#include <string>

#include "absl/status/status.h"
#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

// mm, bmm, matmul, linear and batch_matmul.
bool IsProduct(const std::string& op);
// f32/f64 operands whose batch dimensions are equal or broadcast from one matrix.
bool SupportsProduct(const KernelQuery& query);
absl::Status RunProduct(KernelCall& call, DeviceRuntime& device);

}  // namespace tensord::gpu
