// The OpenCL backend's kernels: every one is generated (server/backends/gpu) and built on
// first use. Families: elementwise maps over broadcast operands (arithmetic, comparisons,
// float functions, activations and their backward ops, where), fills, casts, views, strided
// copies (permute, transpose, expand, contiguous, clone), assign, and reductions (sum, mean,
// prod, all, any), and the optimizer steps (sgd, adam, adamw; opencl_optimizers.h).
#pragma once

#include "absl/status/status.h"
#include "server/backends/backend.h"
#include "server/backends/opencl/opencl_runtime.h"

namespace tensord::opencl {

// Whether a kernel here runs the call (see Backend::Supports).
bool Supports(const KernelQuery& query, const ClDevice& device);
// Whether some call of `op` runs here.
bool Implements(const OpDef& op);
// Runs the call on `device`; its outputs were allocated there by the dispatcher.
absl::Status Run(KernelCall& call, ClDevice& device);

}  // namespace tensord::opencl
