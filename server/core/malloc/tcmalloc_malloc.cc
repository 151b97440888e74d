// gperftools' tcmalloc as the process's malloc (process_malloc.h). Linking the library replaces
// malloc and operator new; this file only gives memory back when the reaper asks.
#include <gperftools/malloc_extension.h>

#include "server/core/process_malloc.h"

namespace tensord::process_malloc {

const char* Name() { return "tcmalloc"; }

// tcmalloc's defaults suit the server: per-thread caches of at most 32 MiB in all, and free
// spans handed back to the system gradually while it runs (TCMALLOC_RELEASE_RATE).
void Configure() {}

bool ReleaseFree(bool idle) {
  if (!idle) return false;
  MallocExtension::instance()->ReleaseFreeMemory();
  return true;
}

}  // namespace tensord::process_malloc
