// Bytes this process has allocated, for tests that check memory comes back (a server started
// in the test process puts its tensor storage here): malloc's blocks in use plus the host
// memory pool's blocks in use (large tensors; server/core/host_memory.h).
#pragma once

#include <malloc.h>

#include <cstddef>
#include <cstdint>

#include "server/core/host_memory.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// The sanitizer runtimes' allocator statistics (gcc ships no header declaring it).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace tensord::testing {

inline int64_t HeapBytes() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // A sanitizer replaces malloc: glibc's mallinfo would see none of the heap.
  return static_cast<int64_t>(__sanitizer_get_current_allocated_bytes());
#else
  // Small blocks in use plus mmapped ones (returned at once when freed), plus pooled blocks in
  // use (cached ones are free for reuse and go back to the system when idle).
  struct mallinfo2 info = mallinfo2();
  const host_memory::Stats pool = host_memory::GetStats();
  return static_cast<int64_t>(info.uordblks + info.hblkhd + pool.mapped_bytes - pool.cached_bytes);
#endif
}

}  // namespace tensord::testing
