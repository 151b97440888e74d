// sort, argsort and topk on an OpenCL device: the rank sort of gpu/sort_source.h.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/opencl/opencl_runtime.h"

namespace tensord::opencl {

bool IsSortOp(const std::string& op);
absl::Status RunSort(KernelCall& c, ClDevice& device);

}  // namespace tensord::opencl
