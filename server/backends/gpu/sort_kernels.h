// sort, argsort and topk on a GPU device: the rank sort of gpu/sort_source.h.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

bool IsSortOp(const std::string& op);
absl::Status RunSort(KernelCall& c, DeviceRuntime& device);

}  // namespace tensord::gpu
