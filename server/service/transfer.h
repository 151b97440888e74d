// Streamed tensor transfer: a put assembles a tensor from ordered chunks into memory charged
// to the session up front; a get reads a stored tensor out in chunks. Neither holds the
// session lock while waiting on the network. No gRPC types.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/dispatch/dispatcher.h"
#include "server/service/session.h"

namespace tensord {

struct PutSpec {
  DType dtype = DType::kF32;
  Shape shape;
  std::string device;  // empty = the session's device
  bool requires_grad = false;
  uint64_t context_id = 0;
};

class PendingPut {
 public:
  // Validates the header against `session` (lock held by the caller) and allocates the
  // destination through the session's account: QUOTA_EXCEEDED before any data is read.
  static absl::StatusOr<PendingPut> Begin(Session& session, const Dispatcher& dispatcher,
                                          PutSpec spec);

  // Copies the next chunk. TRANSFER_INCOMPLETE once more bytes arrive than announced.
  absl::Status Append(absl::string_view chunk);
  // Fills every byte at once: `read` writes expected_bytes() bytes to the pointer it is given
  // (a shared memory region). Only before any Append.
  absl::Status Fill(const std::function<absl::Status(char* dst, int64_t n)>& read);
  // Checks every byte arrived, then stores the tensor (lock held by the caller) and returns
  // its handle. A put that never finishes leaves nothing: the buffer dies with this object.
  absl::StatusOr<uint64_t> Finish(Session& session);

  const Tensor& tensor() const { return tensor_; }
  int64_t expected_bytes() const { return expected_; }
  int64_t received_bytes() const { return received_; }

 private:
  PendingPut(const Dispatcher& dispatcher, PutSpec spec, Tensor tensor, bool host_memory);

  const Dispatcher* dispatcher_;
  PutSpec spec_;
  Tensor tensor_;
  // Chunks go straight into host-addressable storage; other devices get one copy at the end.
  bool host_memory_;
  std::string staging_;
  int64_t expected_ = 0;
  int64_t received_ = 0;
};

class TensorReader {
 public:
  // Looks up `handle` (lock held by the caller). The reader shares the tensor's storage, so a
  // Release during the download does not cut it short.
  static absl::StatusOr<TensorReader> Open(const Session& session, const Dispatcher& dispatcher,
                                           uint64_t handle);

  // Bytes [offset, offset + n) of the tensor. The caller holds the session lock, so a chunk
  // never interleaves with an assign; an assign between chunks fails the download instead of
  // returning a mix of old and new values.
  absl::Status Read(int64_t offset, int64_t n, std::string* out);
  // All the tensor's bytes, valid while the reader lives (same lock and assign rules as Read).
  absl::StatusOr<absl::string_view> Bytes();

  uint64_t handle() const { return handle_; }
  const Tensor& tensor() const { return tensor_; }
  int64_t nbytes() const { return static_cast<int64_t>(tensor_.nbytes()); }

 private:
  TensorReader(const Dispatcher& dispatcher, uint64_t handle, Tensor tensor, bool host_memory)
      : dispatcher_(&dispatcher),
        handle_(handle),
        tensor_(std::move(tensor)),
        host_memory_(host_memory) {}

  const Dispatcher* dispatcher_;
  uint64_t handle_;
  Tensor tensor_;
  bool host_memory_;
  uint64_t version_ = 0;
  std::string staging_;  // the whole tensor, for devices that are not host memory
};

}  // namespace tensord
