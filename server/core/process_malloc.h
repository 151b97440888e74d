// The process's malloc: what serves every allocation host_memory does not pool (tensors under
// 64 KiB, the objects of every call, protobuf messages, gRPC's buffers). The allocator is chosen
// when the server is built (CMake's TENSORD_MALLOC, one file of server/core/malloc/ compiled in):
//   - tcmalloc (gperftools' thread-caching malloc), where it is installed: each thread allocates
//     and frees small objects in a cache of its own, so concurrent sessions do not queue on an
//     allocator lock. Two sessions' batches of small ops moved 332-333 k ops/s together against
//     214-215 k with glibc's two arenas, and the 32-client load ran at 609-705 calls/s against
//     521-605 (docs/performance.md).
//   - glibc, elsewhere and in sanitizer and fuzz builds (the sanitizers interpose malloc
//     themselves): thresholds and arena count fixed so that memory comes back after load.
#pragma once

namespace tensord::process_malloc {

// "tcmalloc" or "glibc".
const char* Name();

// Sets the allocator up for a long-running server. Called once at server start, before its
// threads start.
void Configure();

// Hands memory the allocator holds free back to the operating system after sessions freed
// theirs; `idle`: no session is open. Returns false where it left that for later (the reaper
// asks again next round). The session reaper calls it, off the request path.
// glibc's malloc_trim runs every time (glibc gives nothing back by itself). tcmalloc hands its
// free spans back gradually on its own (TCMALLOC_RELEASE_RATE), so ReleaseFreeMemory runs only
// once the server is idle: releasing all of them at every round while sessions came and went
// ran the 32-client load at 590-609 calls/s against 679-705 (page faults on reuse).
bool ReleaseFree(bool idle);

}  // namespace tensord::process_malloc
