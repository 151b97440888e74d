#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "server/backends/backend.h"

namespace tensord {

struct CpuBackendOptions {
  // oneDNN primitives kept built for reuse, least recently used evicted first (each holds JIT
  // code and descriptors, tens of KiB); 0 builds every primitive afresh. The cache is
  // process-wide: unset leaves its capacity as it is (1024 unless set before).
  std::optional<int64_t> primitive_cache_capacity;
  // Threads one kernel call may use (OpenMP, and oneDNN through it); 0 = OpenMP's default,
  // every core (or OMP_NUM_THREADS). Applied on each calling thread before its first kernel.
  int threads = 0;
};

// The CPU backend: oneDNN primitives where they apply, loops for the rest.
std::unique_ptr<Backend> MakeCpuBackend(const CpuBackendOptions& options = {});

}  // namespace tensord
