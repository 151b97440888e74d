// The process's malloc: what serves every allocation host_memory does not pool (tensors under
// 64 KiB, the objects of every call, protobuf messages, gRPC's buffers). The allocator is chosen
// when the server is built (CMake's TENSORD_MALLOC, one file of server/core/malloc/ compiled in):
//   - tcmalloc (gperftools' thread-caching malloc), where it is installed: each thread allocates
//     and frees small objects in a cache of its own, so concurrent sessions do not queue on an
//     allocator lock. With glibc's two arenas, two sessions' batches of small ops ran at 0.6-0.8x
//     the throughput of one session alone; with tcmalloc at 0.9-1.25x, and the 32-client load at
//     875-899 calls/s against 542-594 (docs/performance.md).
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
// once the server is idle: releasing all of them while sessions come and go cost a third of the
// 32-client load's calls per second in page faults (590-609 calls/s against 875-899).
bool ReleaseFree(bool idle);

}  // namespace tensord::process_malloc
