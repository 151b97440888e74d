// The ops that index by tensors on a GPU device: index_select, gather and embedding read
// through the index on the device; scatter, scatter_add, index_add, embedding's gradient and
// one_hot write through lists built on the host. Every index is read to the host and checked
// first (ops/index_checks.h), so a bad index fails before anything is written: one
// synchronisation per call.
#pragma once

#include <string>

#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

bool IsIndexingOp(const std::string& op);
// The reads, which move storage bits (bf16 and f16 without a trip through f32).
bool ReadsThroughIndex(const std::string& op);
absl::Status RunIndexing(KernelCall& c, DeviceRuntime& device);

}  // namespace tensord::gpu
