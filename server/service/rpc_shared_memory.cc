// RegisterSharedMemory and UnregisterSharedMemory, and the puts and gets that name a place in
// a registered region instead of streaming the bytes (docs/shared-memory.md).
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/service/convert.h"
#include "server/service/service_core.h"
#include "server/service/shared_memory.h"
#include "server/service/transfer.h"

namespace tensord {
namespace {

SharedMemorySpec SpecFromProto(const v1::SharedMemoryInfo& info) {
  return {info.name(), info.key(), info.offset(), info.byte_size()};
}

}  // namespace

absl::Status ServiceCore::RegisterSharedMemory(const v1::RegisterSharedMemoryRequest& req,
                                               v1::RegisterSharedMemoryResponse* resp) {
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  // LIMIT_EXCEEDED when the session holds its most regions; the caller holds the lock.
  const auto check_room = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(session->mu()) -> absl::Status {
    RETURN_IF_ERROR(session->CheckLive());
    const int64_t held = static_cast<int64_t>(session->shared_memory().size());
    if (held < config_.limits.max_shared_memory_regions_per_session) return absl::OkStatus();
    return LimitError("shared memory", "max_shared_memory_regions_per_session", held + 1,
                      config_.limits.max_shared_memory_regions_per_session,
                      "regions registered in the session");
  };
  {
    absl::MutexLock lock(&session->mu());
    RETURN_IF_ERROR(check_room());
  }
  // Opening the object may block on the file system: done without the session's lock.
  std::shared_ptr<const SharedMemoryRegion> region;
  ASSIGN_OR_RETURN(region,
                   SharedMemoryRegion::Open(SpecFromProto(req.region()), config_.shared_memory));
  absl::MutexLock lock(&session->mu());
  // Checked again: another call of the session may have registered one meanwhile.
  RETURN_IF_ERROR(check_room());
  FillSharedMemoryInfo(region->spec(), resp->mutable_region());
  return session->AddSharedMemory(std::move(region));
}

absl::Status ServiceCore::UnregisterSharedMemory(const v1::UnregisterSharedMemoryRequest& req,
                                                 v1::UnregisterSharedMemoryResponse* resp) {
  (void)resp;
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  absl::MutexLock lock(&session->mu());
  RETURN_IF_ERROR(session->CheckLive());
  return session->RemoveSharedMemory(req.name());
}

absl::Status ServiceCore::PutFromSharedMemory(
    const v1::PutHeader& header, const std::function<bool(v1::PutTensorRequest*)>& next,
    v1::PutTensorResponse* resp) {
  PutSpec spec;
  ASSIGN_OR_RETURN(spec, PutSpecFromProto(header));
  RETURN_IF_ERROR(CheckTensorLimits(config_.limits, spec.dtype, spec.shape, "put"));
  int64_t elements;  // the limits were met, so the byte count does not overflow
  ASSIGN_OR_RETURN(elements, CheckedNumElements(spec.shape));
  const uint64_t bytes = static_cast<uint64_t>(elements) * DTypeSize(spec.dtype);
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(header.session_id()));
  const uint64_t offset = header.shared_memory().offset();
  std::shared_ptr<const SharedMemoryRegion> region;
  std::optional<PendingPut> put;
  {
    absl::MutexLock lock(&session->mu());
    RETURN_IF_ERROR(session->CheckLive());
    ASSIGN_OR_RETURN(region, session->FindSharedMemory(header.shared_memory().region()));
    RETURN_IF_ERROR(region->CheckSpan(offset, bytes, "put"));
    ASSIGN_OR_RETURN(put, PendingPut::Begin(*session, dispatcher_, std::move(spec)));
  }
  v1::PutTensorRequest extra;
  if (next(&extra)) {
    return Error(Reason::kInvalidRequest,
                 "put: a put from shared memory is its header alone; the stream carried more",
                 {{"field", "header.shared_memory"}});
  }
  // Read without the session lock, like a stream's chunks: the destination is charged, and
  // the region stays open for this call even if it is unregistered meanwhile.
  RETURN_IF_ERROR(put->Fill([&](char* dst, int64_t n) { return region->Read(offset, n, dst); }));
  absl::MutexLock lock(&session->mu());
  uint64_t handle;
  ASSIGN_OR_RETURN(handle, put->Finish(*session));
  FillTensorInfo(handle, put->tensor(), resp->mutable_tensor());
  return absl::OkStatus();
}

absl::Status ServiceCore::GetToSharedMemory(
    const v1::GetTensorRequest& req,
    const std::function<bool(const v1::GetTensorResponse&)>& write) {
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  v1::GetTensorResponse msg;
  {
    // Written under the session lock, so an assign never interleaves with the copy.
    absl::MutexLock lock(&session->mu());
    RETURN_IF_ERROR(session->CheckLive());
    std::optional<TensorReader> reader;
    ASSIGN_OR_RETURN(reader, TensorReader::Open(*session, dispatcher_, req.handle()));
    std::shared_ptr<const SharedMemoryRegion> region;
    ASSIGN_OR_RETURN(region, session->FindSharedMemory(req.shared_memory().region()));
    const uint64_t offset = req.shared_memory().offset();
    RETURN_IF_ERROR(region->CheckSpan(offset, reader->nbytes(), "get"));
    absl::string_view bytes;
    ASSIGN_OR_RETURN(bytes, reader->Bytes());
    RETURN_IF_ERROR(region->Write(offset, bytes.size(), bytes.data()));
    FillTensorInfo(reader->handle(), reader->tensor(), msg.mutable_info());
  }
  if (!write(msg)) {
    return Error(Reason::kCancelled, "get: the client cancelled the stream");
  }
  return absl::OkStatus();
}

}  // namespace tensord
