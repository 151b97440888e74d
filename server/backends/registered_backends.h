// The one place that knows which backends this build has. Everything else reaches a device
// through the Backend interface, so a backend is added here and nowhere else.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backends/backend.h"
#include "server/backends/cpu/cpu_backend.h"

namespace tensord {

struct BackendOptions {
  CpuBackendOptions cpu;
  // The accelerator devices to serve ("opencl:0"); empty serves every one found. The CPU is
  // always served: number operands and transfers stage through host memory.
  std::vector<std::string> devices;
};

// The backends this build serves, CPU first. A device named in `options.devices` that the
// machine lacks is DEVICE_NOT_FOUND (listing the devices there are); a machine without an
// accelerator serves the CPU alone.
absl::StatusOr<std::vector<std::unique_ptr<Backend>>> MakeBackends(const BackendOptions& options);
// Every device found, with default options (tests).
std::vector<std::unique_ptr<Backend>> MakeBackends();

// Backend kinds compiled into this build ("cpu", "opencl").
std::vector<std::string> CompiledBackendKinds();

}  // namespace tensord
