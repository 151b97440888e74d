// The Backend every GPU vendor shares: its devices are runtimes (device_runtime.h), and
// everything above them (capabilities, allocation, copies, kernels) is written once here. A
// vendor's backend is its runtime plus this.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

struct GpuDevice {
  std::shared_ptr<DeviceRuntime> runtime;
  DeviceInfo info;
};

// A backend of kind `kind` over `devices` (named `<kind>:N`).
std::unique_ptr<Backend> MakeGpuBackend(std::string kind, std::vector<GpuDevice> devices);

}  // namespace tensord::gpu
