#include "server/backends/registered_backends.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/core/status.h"

#if TENSORD_WITH_OPENCL
#include "server/backends/opencl/opencl_backend.h"
#endif
#if TENSORD_WITH_CUDA
#include "server/backends/cuda/cuda_backend.h"
#endif

namespace tensord {
namespace {

// Accelerator backends of this build, each serving the devices it found (possibly none).
std::vector<std::unique_ptr<Backend>> AcceleratorBackends(const std::vector<std::string>& only) {
  std::vector<std::unique_ptr<Backend>> out;
#if TENSORD_WITH_OPENCL
  out.push_back(MakeOpenclBackend(only));
#endif
#if TENSORD_WITH_CUDA
  out.push_back(MakeCudaBackend(only));
#endif
  (void)only;
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Backend>>> MakeBackends(const BackendOptions& options) {
  if (!options.devices.empty()) {
    std::vector<std::string> found = {kHostDevice};
    for (const auto& b : AcceleratorBackends({})) {
      for (const DeviceInfo& d : b->Devices()) found.push_back(d.name);
    }
    for (const std::string& want : options.devices) {
      if (std::find(found.begin(), found.end(), want) != found.end()) continue;
      return Error(Reason::kDeviceNotFound,
                   absl::StrCat("devices: no device '", want, "' on this machine (found: ",
                                absl::StrJoin(found, ", "), "; backends in this build: ",
                                absl::StrJoin(CompiledBackendKinds(), ", "), ")"),
                   {{"device", want}});
    }
  }
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(MakeCpuBackend(options.cpu));
  for (auto& b : AcceleratorBackends(options.devices)) {
    // A backend without a device here serves nothing, and ListOps does not name it.
    if (b->Devices().empty()) continue;
    backends.push_back(std::move(b));
  }
  return backends;
}

std::vector<std::unique_ptr<Backend>> MakeBackends() {
  return std::move(MakeBackends(BackendOptions{})).value();
}

std::vector<std::string> CompiledBackendKinds() {
  std::vector<std::string> kinds = {"cpu"};
#if TENSORD_WITH_OPENCL
  kinds.push_back("opencl");
#endif
#if TENSORD_WITH_CUDA
  kinds.push_back("cuda");
#endif
  return kinds;
}

}  // namespace tensord
