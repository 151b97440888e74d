#include "server/backends/opencl/opencl_backend.h"

#include <algorithm>
#include <string>

#include "server/backends/gpu/gpu_backend.h"
#include "server/backends/opencl/opencl_runtime.h"

namespace tensord {

std::unique_ptr<Backend> MakeOpenclBackend(const std::vector<std::string>& only) {
  const bool names_opencl = std::any_of(
      only.begin(), only.end(), [](const std::string& n) { return n.rfind("opencl:", 0) == 0; });
  std::vector<gpu::GpuDevice> devices;
  for (const auto& d : opencl::Devices()) {
    if (names_opencl && std::find(only.begin(), only.end(), d->name()) == only.end()) continue;
    // A device list naming only other backends' devices serves none of these.
    if (!only.empty() && !names_opencl) continue;
    devices.push_back({d, {d->name(), "opencl", d->description(), d->vendor(), d->memory_bytes()}});
  }
  return gpu::MakeGpuBackend("opencl", std::move(devices));
}

}  // namespace tensord
