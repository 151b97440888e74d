// Tensor transfer and release RPCs.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/service/convert.h"
#include "server/service/service_core.h"
#include "server/service/transfer.h"

namespace tensord {
namespace {

constexpr int64_t kDefaultChunkBytes = int64_t{1} << 20;
// Room for the TensorInfo and protobuf framing next to a chunk inside one message.
constexpr int64_t kMessageOverheadBytes = 64 << 10;

absl::Status CancelledError(absl::string_view what) {
  return Error(Reason::kCancelled, absl::StrCat(what, ": the client cancelled the stream"));
}

}  // namespace

absl::Status ServiceCore::PutTensor(const std::function<bool(v1::PutTensorRequest*)>& next,
                                    const Cancelled& cancelled, v1::PutTensorResponse* resp) {
  v1::PutTensorRequest msg;
  if (!next(&msg)) {
    if (cancelled && cancelled()) return CancelledError("put");
    return Error(Reason::kInvalidRequest, "put: the stream ended before the header",
                 {{"field", "header"}});
  }
  if (!msg.has_header()) {
    return Error(Reason::kInvalidRequest,
                 "put: the first message must carry the header (session, dtype, shape)",
                 {{"field", "header"}});
  }
  if (msg.header().has_shared_memory()) return PutFromSharedMemory(msg.header(), next, resp);
  PutSpec spec;
  ASSIGN_OR_RETURN(spec, PutSpecFromProto(msg.header()));
  RETURN_IF_ERROR(CheckTensorLimits(config_.limits, spec.dtype, spec.shape, "put"));
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(msg.header().session_id()));
  std::optional<PendingPut> put;
  {
    absl::MutexLock lock(&session->mu());
    RETURN_IF_ERROR(session->CheckLive());
    ASSIGN_OR_RETURN(put, PendingPut::Begin(*session, dispatcher_, std::move(spec)));
  }
  // The data streams in without the session lock: other calls of the session proceed, and
  // the destination is already charged, so nothing can overrun the quota meanwhile.
  while (next(&msg)) {
    if (msg.has_header()) {
      return Error(Reason::kInvalidRequest,
                   "put: a second header arrived; one stream carries one tensor",
                   {{"field", "header"}});
    }
    // The transport admits some slack above the limit so that this refusal can say why.
    if (const int64_t size = static_cast<int64_t>(msg.ByteSizeLong());
        size > config_.max_message_bytes) {
      return LimitError("put", "max_message_bytes", size, config_.max_message_bytes,
                        "bytes of a chunk message");
    }
    RETURN_IF_ERROR(put->Append(msg.chunk()));
  }
  if (cancelled && cancelled()) return CancelledError("put");
  absl::MutexLock lock(&session->mu());
  uint64_t handle;
  ASSIGN_OR_RETURN(handle, put->Finish(*session));
  FillTensorInfo(handle, put->tensor(), resp->mutable_tensor());
  return absl::OkStatus();
}

absl::Status ServiceCore::GetTensor(
    const v1::GetTensorRequest& req,
    const std::function<bool(const v1::GetTensorResponse&)>& write) {
  if (req.has_shared_memory()) return GetToSharedMemory(req, write);
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  int64_t chunk = req.chunk_bytes() ? static_cast<int64_t>(req.chunk_bytes()) : kDefaultChunkBytes;
  chunk = std::max<int64_t>(1, std::min(chunk, config_.max_message_bytes - kMessageOverheadBytes));
  std::optional<TensorReader> reader;
  {
    absl::MutexLock lock(&session->mu());
    RETURN_IF_ERROR(session->CheckLive());
    ASSIGN_OR_RETURN(reader, TensorReader::Open(*session, dispatcher_, req.handle()));
  }
  const int64_t total = reader->nbytes();
  int64_t offset = 0;
  v1::GetTensorResponse msg;
  do {
    msg.Clear();
    if (offset == 0) FillTensorInfo(reader->handle(), reader->tensor(), msg.mutable_info());
    const int64_t n = std::min(chunk, total - offset);
    {
      absl::MutexLock lock(&session->mu());
      RETURN_IF_ERROR(session->CheckLive());
      RETURN_IF_ERROR(reader->Read(offset, n, msg.mutable_chunk()));
    }
    if (!write(msg)) return CancelledError("get");
    offset += n;
  } while (offset < total);
  return absl::OkStatus();
}

absl::Status ServiceCore::Release(const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  absl::MutexLock lock(&session->mu());
  RETURN_IF_ERROR(session->CheckLive());
  size_t released;
  ASSIGN_OR_RETURN(released, session->Release(req.handles()));
  resp->set_released(static_cast<uint32_t>(released));
  return absl::OkStatus();
}

}  // namespace tensord
