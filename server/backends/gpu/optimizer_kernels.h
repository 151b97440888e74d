// The optimizer ops (sgd, adam, adamw) on a GPU device: the step counter is read to the
// host (one small blocking read), the step's scalars are computed there as on the CPU, one
// generated kernel (server/backends/gpu/codegen/optimizer_source.h) updates param and state, and
// the counter is written back incremented.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

bool IsOptimizer(const std::string& op);
absl::Status RunOptimizer(KernelCall& call, DeviceRuntime& device);

}  // namespace tensord::gpu
