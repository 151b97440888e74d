#include "server/service/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/core/quoted_value.h"
#include "server/core/status.h"

namespace tensord {
namespace {

// One pread/pwrite moves at most this much (Linux caps a call at about 2 GiB anyway).
constexpr uint64_t kMaxIoBytes = uint64_t{1} << 30;

absl::Status Unavailable(const SharedMemorySpec& spec, absl::string_view cause,
                         absl::string_view why) {
  return Error(Reason::kSharedMemoryUnavailable,
               absl::StrCat("shared memory region '", spec.name, "' (", spec.key, "): ", why),
               {{"region", spec.name}, {"key", spec.key}, {"cause", std::string(cause)}});
}

absl::Status InvalidSpec(absl::string_view field, std::string message,
                         const SharedMemorySpec& spec) {
  return Error(Reason::kInvalidRequest, std::move(message),
               {{"field", absl::StrCat("region.", field)}, {"region", spec.name}});
}

absl::Status CheckSpec(const SharedMemorySpec& spec) {
  if (spec.name.empty()) {
    return InvalidSpec("name", "shared memory: a region needs a name", spec);
  }
  if (spec.name.size() > kMaxSharedMemoryNameBytes) {
    return InvalidSpec("name",
                       absl::StrCat("shared memory: region name '", spec.name, "' is longer than ",
                                    kMaxSharedMemoryNameBytes, " bytes"),
                       spec);
  }
  // shm_open's rule for portable names: one leading slash, then a file name of /dev/shm.
  const bool bad_key = spec.key.size() < 2 || spec.key.size() > kMaxSharedMemoryKeyBytes ||
                       spec.key[0] != '/' || spec.key.find('/', 1) != std::string::npos ||
                       spec.key.find('\0') != std::string::npos || spec.key == "/." ||
                       spec.key == "/..";
  if (bad_key) {
    return InvalidSpec("key",
                       absl::StrCat("shared memory: key '", Shortened(spec.key),
                                    "' is not a shared memory object's name: '/' and 1 to ",
                                    kMaxSharedMemoryKeyBytes - 1, " more bytes without '/'"),
                       spec);
  }
  if (spec.byte_size == 0) {
    return InvalidSpec("byte_size", "shared memory: a region needs byte_size > 0", spec);
  }
  if (spec.offset > UINT64_MAX - spec.byte_size ||
      spec.offset + spec.byte_size > static_cast<uint64_t>(INT64_MAX)) {
    return InvalidSpec("offset",
                       absl::StrCat("shared memory: offset ", spec.offset, " + byte_size ",
                                    spec.byte_size, " overflows a file offset"),
                       spec);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const SharedMemoryRegion>> SharedMemoryRegion::Open(
    SharedMemorySpec spec, const SharedMemoryOptions& options) {
  if (!options.enabled) {
    return Unavailable(spec, "disabled",
                       "this server does not serve shared memory (start it with "
                       "--shared-memory, on the host of its clients)");
  }
  RETURN_IF_ERROR(CheckSpec(spec));
  if (!absl::StartsWith(spec.key, options.key_prefix)) {
    return Unavailable(spec, "key_prefix",
                       absl::StrCat("this server opens only objects whose key starts with '",
                                    options.key_prefix, "'"));
  }
  // shm_open opens /dev/shm/<name> with O_NOFOLLOW and O_CLOEXEC; never creates here.
  const int fd = shm_open(spec.key.c_str(), O_RDWR, 0);
  if (fd < 0) {
    return Unavailable(spec, "open",
                       absl::StrCat("cannot open the object read-write: ", std::strerror(errno)));
  }
  auto region = std::shared_ptr<const SharedMemoryRegion>(new SharedMemoryRegion(spec, fd));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return Unavailable(spec, "not_regular", "the key names something other than an object");
  }
  RETURN_IF_ERROR(region->CheckObjectHolds(spec.offset + spec.byte_size, "register"));
  return region;
}

SharedMemoryRegion::~SharedMemoryRegion() { close(fd_); }

absl::Status SharedMemoryRegion::CheckObjectHolds(uint64_t end, const std::string& what) const {
  struct stat st;
  if (fstat(fd_, &st) != 0) {
    return Unavailable(spec_, "open", absl::StrCat(what, ": fstat failed: ", std::strerror(errno)));
  }
  if (static_cast<uint64_t>(st.st_size) < end) {
    return Unavailable(
        spec_, "too_small",
        absl::StrCat(what, ": the object holds ", st.st_size, " bytes, the ", "region needs ", end,
                     " (offset ", spec_.offset, " + byte_size ", spec_.byte_size, ")"));
  }
  return absl::OkStatus();
}

absl::Status SharedMemoryRegion::CheckSpan(uint64_t offset, uint64_t n,
                                           const std::string& what) const {
  if (offset > spec_.byte_size || n > spec_.byte_size - offset) {
    return Error(Reason::kInvalidRequest,
                 absl::StrCat(what, ": bytes [", offset, ", ", offset, " + ", n,
                              ") lie outside shared memory region '", spec_.name, "' of ",
                              spec_.byte_size, " bytes"),
                 {{"field", "shared_memory.offset"},
                  {"region", spec_.name},
                  {"offset", absl::StrCat(offset)},
                  {"bytes", absl::StrCat(n)},
                  {"region_bytes", absl::StrCat(spec_.byte_size)}});
  }
  return absl::OkStatus();
}

absl::Status SharedMemoryRegion::Read(uint64_t offset, uint64_t n, char* dst) const {
  return Copy(offset, n, "put",
              [&](uint64_t done, size_t len, off_t at) { return pread(fd_, dst + done, len, at); });
}

absl::Status SharedMemoryRegion::Write(uint64_t offset, uint64_t n, const char* src) const {
  return Copy(offset, n, "get", [&](uint64_t done, size_t len, off_t at) {
    return pwrite(fd_, src + done, len, at);
  });
}

absl::Status SharedMemoryRegion::Copy(uint64_t offset, uint64_t n, const std::string& what,
                                      const CopyStep& step) const {
  RETURN_IF_ERROR(CheckSpan(offset, n, what));
  // The whole region, not only the span: a shrunk object fails every call alike (the client
  // registered how much it keeps), and a write past its end would grow it silently, leaving
  // the client zeros where it expects its tensor.
  const uint64_t region_end = spec_.offset + spec_.byte_size;
  RETURN_IF_ERROR(CheckObjectHolds(region_end, what));
  uint64_t done = 0;
  while (done < n) {
    const ssize_t moved = step(done, static_cast<size_t>(std::min(n - done, kMaxIoBytes)),
                               static_cast<off_t>(spec_.offset + offset + done));
    if (moved < 0 && errno == EINTR) continue;
    if (moved <= 0) {
      // Short: the object was shrunk during the call.
      RETURN_IF_ERROR(CheckObjectHolds(region_end, what));
      return Unavailable(
          spec_, "open",
          absl::StrCat(what, ": ", moved < 0 ? std::strerror(errno) : "end of file"));
    }
    done += static_cast<uint64_t>(moved);
  }
  return absl::OkStatus();
}

}  // namespace tensord
