// glibc's malloc, tuned so that a server's memory comes back after load (process_malloc.h).
#include <malloc.h>

#include "server/core/host_memory.h"
#include "server/core/process_malloc.h"

namespace tensord::process_malloc {
namespace {

constexpr int kMallocArenas = 2;

}  // namespace

const char* Name() { return "glibc"; }

void Configure() {
  // Setting them also turns off glibc's dynamic thresholds, which would follow freed blocks up
  // to 32 MiB (mmap) and 64 MiB (trim) and keep that much in each arena.
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(host_memory::kMallocMmapThresholdBytes));
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(host_memory::kMallocTrimThresholdBytes));
  // glibc gives each thread that meets contention an arena of its own, up to 8 per core, and
  // malloc_trim cannot hand back what their scattered small blocks pin: under 32 clients the
  // gRPC threads left 16 arenas holding 2-4 MiB each. Nor can it shrink the top of an arena
  // other than the main one below the trim threshold. Two arenas (and the per-thread caches in
  // front of them) keep the server's memory near its baseline after load (scripts/load.sh:
  // with 4 arenas a 32 MiB trim threshold left 182 MiB after load against a 107 MiB baseline,
  // with 2 and 16 MiB 111-114 MiB at 535-572 calls/s). The price is contention: threads of
  // concurrent sessions queue on the two arenas' locks (8 arenas ran two sessions' batches at
  // 1.15-1.37x one session's, 2 arenas at 0.6-0.8x, but left 178-188 MiB after load).
  mallopt(M_ARENA_MAX, kMallocArenas);
}

bool ReleaseFree(bool /*idle*/) {
  malloc_trim(0);
  return true;
}

}  // namespace tensord::process_malloc
