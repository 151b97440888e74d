#include "server/backends/cuda/nccl_collectives.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "server/backends/cuda/cuda_libraries.h"
#include "server/backends/cuda/cuda_runtime.h"
#include "server/core/status.h"
#include "server/ops/op_names.h"

namespace tensord::cuda {
namespace {

using Clock = std::chrono::steady_clock;
// A wait looks at the communicator's state without sleeping for its first kSpin (a gradient
// bucket's all_reduce on NVLink takes tens of microseconds, less than one sleep of the
// kernel's timer), then every kPoll (a peer that is late takes milliseconds to seconds).
constexpr auto kSpin = std::chrono::milliseconds(2);
constexpr auto kPoll = std::chrono::microseconds(50);

std::optional<ncclDataType_t> NcclType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF64:
      return ncclFloat64;
    case DType::kI32:
      return ncclInt32;
    case DType::kI64:
      return ncclInt64;
    case DType::kU8:
      return ncclUint8;
    case DType::kI8:
      return ncclInt8;
    default:
      return std::nullopt;
  }
}

ncclRedOp_t NcclOp(const std::string& op) {
  if (op == "product") return ncclProd;
  if (op == "max") return ncclMax;
  if (op == "min") return ncclMin;
  if (op == "mean") return ncclAvg;
  return ncclSum;
}

class NcclCommunicator final : public DeviceCommunicator {
 public:
  NcclCommunicator(const Nccl& nccl, CudaDevice& device, ncclComm_t comm, int rank,
                   std::chrono::milliseconds timeout)
      : nccl_(nccl), device_(device), comm_(comm), rank_(rank), timeout_(timeout) {}

  // Aborted rather than destroyed: every call has finished by now, and an abort never waits for
  // peers (that may be gone).
  ~NcclCommunicator() override { AbortNow(); }

  absl::Status AllReduce(const Tensor& in, Tensor& out, const std::string& op) override {
    const ncclDataType_t type = *NcclType(in.dtype());
    return Run(opname::all_reduce, in, out, [&](cudaStream_t s) {
      return nccl_.AllReduce(in.raw(), out.raw(), in.numel(), type, NcclOp(op), comm_, s);
    });
  }

  absl::Status AllGather(const Tensor& in, Tensor& out) override {
    return Run(opname::all_gather, in, out, [&](cudaStream_t s) {
      return nccl_.AllGather(in.raw(), out.raw(), in.nbytes(), ncclUint8, comm_, s);
    });
  }

  absl::Status ReduceScatter(const Tensor& in, Tensor& out, const std::string& op) override {
    const ncclDataType_t type = *NcclType(in.dtype());
    return Run(opname::reduce_scatter, in, out, [&](cudaStream_t s) {
      return nccl_.ReduceScatter(in.raw(), out.raw(), out.numel(), type, NcclOp(op), comm_, s);
    });
  }

  absl::Status Broadcast(const Tensor& in, Tensor& out, int root) override {
    return Run(opname::broadcast, in, out, [&](cudaStream_t s) {
      return nccl_.Broadcast(in.raw(), out.raw(), in.nbytes(), ncclUint8, root, comm_, s);
    });
  }

  absl::Status Reduce(const Tensor& in, Tensor& out, const std::string& op, int root) override {
    const ncclDataType_t type = *NcclType(in.dtype());
    return Run(opname::reduce, in, out, [&](cudaStream_t s) {
      // NCCL writes the root's output only.
      if (rank_ != root && cudaMemsetAsync(out.raw(), 0, out.nbytes(), s) != cudaSuccess) {
        return ncclUnhandledCudaError;
      }
      return nccl_.Reduce(in.raw(), out.raw(), in.numel(), type, NcclOp(op), root, comm_, s);
    });
  }

  void Abort() override { aborted_.store(true); }

 private:
  // Enqueues the call, then waits for it: every failure aborts the communicator.
  absl::Status Run(const char* what, const Tensor& in, Tensor& out,
                   const std::function<ncclResult_t(cudaStream_t)>& enqueue) {
    if (comm_ == nullptr) return Fail(what, "an earlier call failed", "broken");
    if (in.nbytes() == 0 && out.nbytes() == 0) return absl::OkStatus();
    const void* blocks[] = {in.raw(), out.raw()};
    ASSIGN_OR_RETURN(cudaStream_t stream, device_.StreamAfter(blocks));
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline = start + timeout_;
    spin_until_ = start + kSpin;
    // A non-blocking communicator may still be enqueueing when the call returns.
    ncclResult_t state = enqueue(stream);
    while (state == ncclInProgress) {
      RETURN_IF_ERROR(Waited(what, deadline));
      nccl_.CommGetAsyncError(comm_, &state);
    }
    if (state != ncclSuccess) return Fail(what, state);
    cudaEvent_t done = nullptr;
    cudaError_t err = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    if (err == cudaSuccess) err = cudaEventRecord(done, stream);
    absl::Status waited = absl::OkStatus();
    while (err == cudaSuccess) {
      const cudaError_t query = cudaEventQuery(done);
      if (query == cudaSuccess) break;
      if (query != cudaErrorNotReady) {
        err = query;
        break;
      }
      nccl_.CommGetAsyncError(comm_, &state);
      waited = state != ncclSuccess && state != ncclInProgress ? Fail(what, state)
                                                               : Waited(what, deadline);
      if (!waited.ok()) break;  // the communicator is aborted: its kernels have ended
    }
    if (done != nullptr) cudaEventDestroy(done);
    if (err != cudaSuccess) {
      AbortNow();
      return CudaError(err, absl::StrCat("NCCL ", what), device_.name());
    }
    return waited;
  }

  // Ends the communicator's kernels and its connections: every later call fails.
  void AbortNow() {
    if (comm_ == nullptr) return;
    nccl_.CommAbort(comm_);
    comm_ = nullptr;
  }

  // One poll interval (a yield while the call is young), unless the deadline passed or the
  // session closed.
  absl::Status Waited(const char* what, Clock::time_point deadline) {
    if (aborted_.load()) return Fail(what, "the session closed", "aborted");
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      return Fail(what,
                  absl::StrCat("Timed out after ", timeout_.count(), " ms waiting for the peers"),
                  "timeout");
    }
    if (now < spin_until_) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kPoll);
    }
    return absl::OkStatus();
  }

  absl::Status Fail(const char* what, ncclResult_t state) {
    const char* last = nccl_.GetLastError(comm_);
    const std::string detail =
        absl::StrCat(nccl_.GetErrorString(state), last != nullptr && *last ? ": " : "",
                     last != nullptr ? last : "");
    // What a lost or failing peer looks like; the others are this device's or this build's.
    if (state == ncclRemoteError || state == ncclSystemError) {
      return Fail(what, detail, "connection");
    }
    AbortNow();
    return Error(Reason::kInternal,
                 absl::StrCat("NCCL ", what, " on ", device_.name(), ": ", detail),
                 {{"device", device_.name()}});
  }

  absl::Status Fail(const char* what, const std::string& detail, const std::string& cause) {
    AbortNow();
    return Error(Reason::kPeerUnavailable,
                 absl::StrCat("NCCL ", what, " on ", device_.name(), ": ", detail),
                 {{"device", device_.name()}, {"cause", cause}});
  }

  const Nccl& nccl_;
  CudaDevice& device_;
  ncclComm_t comm_;  // null once aborted
  const int rank_;
  const std::chrono::milliseconds timeout_;
  Clock::time_point spin_until_;  // of the call waited for
  std::atomic<bool> aborted_{false};
};

class NcclCollectives final : public DeviceCollectives {
 public:
  NcclCollectives(const Nccl& nccl, CudaDevice& device) : nccl_(nccl), device_(device) {}

  std::string library() const override { return "nccl"; }
  bool Takes(DType dtype, bool reduces) const override {
    return !reduces || NcclType(dtype).has_value();
  }
  size_t id_bytes() const override { return sizeof(ncclUniqueId); }

  absl::StatusOr<std::string> NewId() override {
    ncclUniqueId id;
    const ncclResult_t r = nccl_.GetUniqueId(&id);
    if (r != ncclSuccess) {
      return Error(Reason::kInternal,
                   absl::StrCat("NCCL: no communicator id: ", nccl_.GetErrorString(r)),
                   {{"device", device_.name()}});
    }
    return std::string(id.internal, sizeof id.internal);
  }

  absl::StatusOr<std::unique_ptr<DeviceCommunicator>> Join(
      const std::string& id, int rank, int world, std::chrono::milliseconds timeout) override {
    const Metadata md = {{"device", device_.name()}};
    if (id.size() != sizeof(ncclUniqueId)) {
      return Error(Reason::kInternal, "NCCL: a communicator id of the wrong size", md);
    }
    ncclUniqueId uid;
    std::memcpy(uid.internal, id.data(), sizeof uid.internal);
    // The device current on this thread is the one the communicator belongs to.
    RETURN_IF_ERROR(device_.CurrentStream().status());
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclResult_t state = nccl_.CommInitRankConfig(&comm, world, uid, rank, &config);
    const Clock::time_point deadline = Clock::now() + timeout;
    while (state == ncclInProgress && comm != nullptr && Clock::now() < deadline) {
      std::this_thread::sleep_for(kPoll);
      nccl_.CommGetAsyncError(comm, &state);
    }
    if (state == ncclSuccess) {
      return std::unique_ptr<DeviceCommunicator>(
          std::make_unique<NcclCommunicator>(nccl_, device_, comm, rank, timeout));
    }
    std::string detail = state == ncclInProgress ? absl::StrCat("Timed out after ", timeout.count(),
                                                                " ms waiting for the peers")
                                                 : nccl_.GetErrorString(state);
    const char* last = comm != nullptr ? nccl_.GetLastError(comm) : nullptr;
    if (state != ncclInProgress && last != nullptr && *last) absl::StrAppend(&detail, ": ", last);
    // Two ranks on one GPU (servers of one machine that share a device), most likely.
    if (state == ncclInvalidUsage) {
      absl::StrAppend(&detail,
                      " (NCCL takes one rank per GPU: give each server of the group a "
                      "GPU of its own, e.g. CUDA_VISIBLE_DEVICES)");
    }
    if (comm != nullptr) nccl_.CommAbort(comm);
    const bool peers =
        state == ncclInProgress || state == ncclRemoteError || state == ncclSystemError;
    return Error(
        peers ? Reason::kPeerUnavailable : Reason::kInternal,
        absl::StrCat("NCCL: the communicator on ", device_.name(), " did not form: ", detail),
        {{"device", device_.name()},
         {"cause", state == ncclInProgress ? "timeout" : "connection"}});
  }

 private:
  const Nccl& nccl_;
  CudaDevice& device_;
};

}  // namespace

std::unique_ptr<DeviceCollectives> MakeNcclCollectives(CudaDevice& device) {
  const char* setting = std::getenv("TENSORD_NCCL");
  if (setting != nullptr && std::string(setting) == "off") return nullptr;
  absl::StatusOr<const Nccl*> nccl = LoadNccl();
  if (!nccl.ok()) return nullptr;
  return std::make_unique<NcclCollectives>(**nccl, device);
}

}  // namespace tensord::cuda
