// A GPU backend's kernels, by op family: every one is generated (gpu/codegen), built on first
// use by the device's runtime and launched through it. Families: elementwise maps over broadcast
// operands (arithmetic, comparisons, float functions, activations and their backward ops, where),
// fills, casts, views, strided copies (permute, transpose, expand, contiguous, clone), assign, and
// reductions (sum, mean, prod, all, any), and the optimizer steps (sgd, adam, adamw;
// optimizer_kernels.h).
#pragma once

#include "absl/status/status.h"
#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

// Whether a kernel here runs the call (see Backend::Supports).
bool Supports(const KernelQuery& query, const DeviceRuntime& device);
// Whether some call of `op` runs here.
bool Implements(const OpDef& op);
// Runs the call on `device`; its outputs were allocated there by the dispatcher.
absl::Status Run(KernelCall& call, DeviceRuntime& device);

}  // namespace tensord::gpu
