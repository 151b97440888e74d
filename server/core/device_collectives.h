// Collectives whose data moves between devices directly, with the device vendor's library
// (NCCL on cuda), among one device on each of the N servers of a process group. The group
// agrees on every call first (server/distributed/collective_agreement.h) and sends a
// communicator's identity to its ranks over its own transport; this is what it needs of a
// backend that has such a library. No library header here.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/dtype.h"
#include "server/core/tensor.h"

namespace tensord {

// One rank's end of a communicator. Each call enqueues the collective on the calling thread's
// stream of the device (after the work that wrote its tensors) and returns when it is done, or
// fails: PEER_UNAVAILABLE (metadata `cause`: "timeout" when a peer did not take part within the
// communicator's timeout, "connection" when the library lost one) or INTERNAL for the device.
// After a failure the communicator is unusable.
class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;
  // `op`: "sum", "mean", "max", "min" or "product". `out` has `in`'s shape.
  virtual absl::Status AllReduce(const Tensor& in, Tensor& out, const std::string& op) = 0;
  // `out` holds every rank's `in`, in rank order.
  virtual absl::Status AllGather(const Tensor& in, Tensor& out) = 0;
  // `in` reduced over the ranks, this rank's 1/N of it (in its leading dimension) in `out`.
  virtual absl::Status ReduceScatter(const Tensor& in, Tensor& out, const std::string& op) = 0;
  // `out` takes `root`'s `in`.
  virtual absl::Status Broadcast(const Tensor& in, Tensor& out, int root) = 0;
  // `in` reduced over the ranks into `root`'s `out`; zeros in the others'.
  virtual absl::Status Reduce(const Tensor& in, Tensor& out, const std::string& op, int root) = 0;
  // Makes a call waiting for its peers fail now (the session is closing). Thread-safe.
  virtual void Abort() = 0;
};

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  // The library's name, as the ranks compare it ("nccl").
  virtual std::string library() const = 0;
  // Whether the library runs a collective on tensors of `dtype`: `reduces` for all_reduce,
  // reduce_scatter and reduce, which must compute as the host's reductions do (bf16 and f16 in
  // f32, rounded once, which the library does not); moves take every dtype.
  virtual bool Takes(DType dtype, bool reduces) const = 0;
  // The size of a communicator's identity.
  virtual size_t id_bytes() const = 0;
  // A new communicator's identity, made on one rank and sent to the others.
  virtual absl::StatusOr<std::string> NewId() = 0;
  // This rank's end of the communicator `id` among `world` ranks, on the device these
  // collectives belong to: blocks until every rank has joined, at most `timeout`
  // (PEER_UNAVAILABLE, cause "timeout"), which also bounds each of its calls.
  virtual absl::StatusOr<std::unique_ptr<DeviceCommunicator>> Join(
      const std::string& id, int rank, int world, std::chrono::milliseconds timeout) = 0;
};

}  // namespace tensord
