// Same-host shared memory (docs/shared-memory.md): a region of a POSIX shared memory object
// that a client registered with its session, so that puts and gets move a tensor's bytes
// through memory both processes see instead of through gRPC messages.
//
// The server keeps the object open (a file descriptor: the client may unlink the name right
// after registering, and nothing is left in /dev/shm if it dies) and moves bytes with
// pread/pwrite instead of a mapping. A client can shrink its object at any time; through a
// mapping the server would then die of SIGBUS on the next access, through the descriptor the
// access comes up short and fails with SHARED_MEMORY_UNAVAILABLE. The copy costs the same: a
// mapping would be copied into the tensor's storage too, which must not change under a
// computation. No gRPC types.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace tensord {

// Region names only label a session's regions; a longer one is INVALID_REQUEST.
inline constexpr size_t kMaxSharedMemoryNameBytes = 128;
// shm_open's limit: "/" and a file name of /dev/shm (NAME_MAX bytes).
inline constexpr size_t kMaxSharedMemoryKeyBytes = 255;

struct SharedMemoryOptions {
  // Off by default: a client that may register a region may read and write every shared
  // memory object the server's user can open.
  bool enabled = false;
  // When not empty, only objects whose key starts with it may be registered ("/tensord-").
  std::string key_prefix;
};

struct SharedMemorySpec {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

class SharedMemoryRegion {
 public:
  // Opens the object `spec.key` read-write. INVALID_REQUEST for a bad name or key;
  // SHARED_MEMORY_UNAVAILABLE (cause disabled, key_prefix, open, not_regular, too_small) when
  // shared memory is off, the key is outside the allowed prefix, the object cannot be opened,
  // is not a regular shared memory object, or holds fewer than offset + byte_size bytes.
  static absl::StatusOr<std::shared_ptr<const SharedMemoryRegion>> Open(
      SharedMemorySpec spec, const SharedMemoryOptions& options);
  ~SharedMemoryRegion();
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  const SharedMemorySpec& spec() const { return spec_; }

  // INVALID_REQUEST (field shared_memory.offset) unless [offset, offset + n) lies inside the
  // region; `what` names the caller ("put", "get").
  absl::Status CheckSpan(uint64_t offset, uint64_t n, const std::string& what) const;
  // Bytes [offset, offset + n) of the region into `dst` / from `src` (CheckSpan first).
  // SHARED_MEMORY_UNAVAILABLE (cause too_small) when the object was shrunk below the span.
  absl::Status Read(uint64_t offset, uint64_t n, char* dst) const;
  absl::Status Write(uint64_t offset, uint64_t n, const char* src) const;

 private:
  SharedMemoryRegion(SharedMemorySpec spec, int fd) : spec_(std::move(spec)), fd_(fd) {}
  // One pread or pwrite of `len` bytes, `done` bytes into the span, at file offset `at`.
  using CopyStep = std::function<ssize_t(uint64_t done, size_t len, off_t at)>;
  // Moves the span [offset, offset + n) in steps, checked against the region and the object.
  absl::Status Copy(uint64_t offset, uint64_t n, const std::string& what,
                    const CopyStep& step) const;
  // The object's size now; SHARED_MEMORY_UNAVAILABLE when it no longer holds `end` bytes.
  absl::Status CheckObjectHolds(uint64_t end, const std::string& what) const;

  const SharedMemorySpec spec_;
  const int fd_;
};

}  // namespace tensord
