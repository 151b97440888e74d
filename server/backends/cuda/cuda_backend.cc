#include "server/backends/cuda/cuda_backend.h"

#include <algorithm>
#include <string>

#include "server/backends/cuda/cuda_runtime.h"
#include "server/backends/gpu/gpu_backend.h"

namespace tensord {

std::unique_ptr<Backend> MakeCudaBackend(const std::vector<std::string>& only) {
  const bool names_cuda = std::any_of(
      only.begin(), only.end(), [](const std::string& n) { return n.rfind("cuda:", 0) == 0; });
  std::vector<gpu::GpuDevice> devices;
  if (only.empty() || names_cuda) {
    for (const auto& d : cuda::Devices()) {
      if (names_cuda && std::find(only.begin(), only.end(), d->name()) == only.end()) continue;
      devices.push_back({d, {d->name(), "cuda", d->description(), "NVIDIA", d->memory_bytes()}});
    }
  }
  return gpu::MakeGpuBackend("cuda", std::move(devices));
}

}  // namespace tensord
