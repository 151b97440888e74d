#pragma once

#include <string>

#include "absl/status/status.h"
#include "server/backends/backend.h"
#include "server/backends/opencl/opencl_runtime.h"

namespace tensord::opencl {

// mm, bmm, matmul, linear and batch_matmul.
bool IsProduct(const std::string& op);
// f32/f64 operands whose batch dimensions are equal or broadcast from one matrix.
bool SupportsProduct(const KernelQuery& query);
absl::Status RunProduct(KernelCall& call, ClDevice& device);

}  // namespace tensord::opencl
