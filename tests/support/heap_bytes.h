// Bytes this process has allocated on the heap, for tests that check memory comes back (a
// server started in the test process puts its tensor storage here).
#pragma once

#include <malloc.h>

#include <cstddef>
#include <cstdint>

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
  // Small blocks in use plus mmapped ones (large tensors, returned at once when freed).
  struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
#endif
}

}  // namespace tensord::testing
