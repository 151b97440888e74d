// SharedMemory: a same-host region through which a session's puts and gets move a tensor's
// bytes without sending them over gRPC (docs/shared-memory.md). The server must run on the
// same host (or share /dev/shm with this process) and with --shared-memory.
//
//   ASSIGN_OR_RETURN(SharedMemory shm, SharedMemory::Create(session, 64 << 20));
//   ASSIGN_OR_RETURN(Tensor t, shm.Put(HostTensor(values, {1024, 1024})));
//   ASSIGN_OR_RETURN(HostTensor back, shm.Get(t));
//
// Create makes a POSIX shared memory object, maps it, registers it with the session and then
// unlinks its name: the server keeps the object open, so nothing is left in /dev/shm when
// either process ends. The region is unregistered when the object goes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/cpp/host_tensor.h"
#include "client/cpp/session.h"
#include "client/cpp/tensor.h"

namespace tensord::client {

class SharedMemory {
 public:
  // A region of `bytes` bytes registered in `session` under `name` (empty: the object's key).
  static absl::StatusOr<SharedMemory> Create(const Session& session, uint64_t bytes,
                                             std::string name = "");
  SharedMemory(SharedMemory&& other) noexcept;
  SharedMemory& operator=(SharedMemory&& other) noexcept;
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  ~SharedMemory();  // unregisters (best effort) and unmaps

  const std::string& name() const { return name_; }
  const std::string& key() const { return key_; }
  uint64_t size() const { return size_; }
  // The mapped region: write a tensor's bytes here and PutAt them, or read what GetAt wrote.
  char* data() const { return static_cast<char*>(base_); }

  // Copies `value` to `offset` and puts it from there.
  absl::StatusOr<Tensor> Put(const HostTensor& value, const PutOptions& options = {},
                             uint64_t offset = 0);
  // Puts the bytes already at `offset` as a tensor of `dtype` and `shape` (no copy here).
  absl::StatusOr<Tensor> PutAt(DType dtype, const Shape& shape, uint64_t offset = 0,
                               const PutOptions& options = {});
  // Has the server write `tensor`'s bytes at `offset`, then copies them out.
  absl::StatusOr<HostTensor> Get(const Tensor& tensor, uint64_t offset = 0);
  // Has the server write `tensor`'s bytes at `offset` (read them through data()).
  absl::Status GetAt(const Tensor& tensor, uint64_t offset = 0);
  // Unregisters the region now; later puts and gets fail with SHARED_MEMORY_NOT_FOUND.
  absl::Status Unregister();

 private:
  SharedMemory(std::shared_ptr<internal::SessionState> state, std::string name, std::string key,
               void* base, uint64_t size)
      : state_(std::move(state)),
        name_(std::move(name)),
        key_(std::move(key)),
        base_(base),
        size_(size) {}
  void Reset();

  std::shared_ptr<internal::SessionState> state_;
  std::string name_;
  std::string key_;
  void* base_ = nullptr;
  uint64_t size_ = 0;
  bool registered_ = false;
};

}  // namespace tensord::client
