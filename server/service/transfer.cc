#include "server/service/transfer.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"

namespace tensord {
namespace {

std::string Str(int64_t v) { return absl::StrCat(v); }

// Host memory is written through raw pointers; device memory only through its backend.
bool IsHostMemory(const Tensor& t) { return t.storage() == nullptr || t.storage()->on_host(); }

}  // namespace

PendingPut::PendingPut(const Dispatcher& dispatcher, PutSpec spec, Tensor tensor, bool host_memory)
    : dispatcher_(&dispatcher),
      spec_(std::move(spec)),
      tensor_(std::move(tensor)),
      host_memory_(host_memory),
      expected_(static_cast<int64_t>(tensor_.nbytes())) {}

absl::StatusOr<PendingPut> PendingPut::Begin(Session& session, const Dispatcher& dispatcher,
                                             PutSpec spec) {
  if (spec.device.empty()) spec.device = session.device();
  int64_t n;
  ASSIGN_OR_RETURN(n, CheckedNumElements(spec.shape));
  const int64_t size = static_cast<int64_t>(DTypeSize(spec.dtype));
  if (n > std::numeric_limits<int64_t>::max() / size) {
    return Error(Reason::kLimitExceeded,
                 absl::StrCat("put: shape ", ShapeToString(spec.shape), " of ",
                              DTypeName(spec.dtype), " overflows the byte count"),
                 {{"shape", ShapeToString(spec.shape)}, {"limit", "element_count"}});
  }
  if (spec.requires_grad) {
    if (!IsFloat(spec.dtype)) {
      return Error(
          Reason::kDtypeMismatch,
          absl::StrCat("put: requires_grad needs a float dtype, got ", DTypeName(spec.dtype)),
          {{"dtype", std::string(DTypeName(spec.dtype))}});
    }
    RETURN_IF_ERROR(session.OpenContextForLeaf(spec.context_id, "put").status());
  }
  Backend* backend;
  ASSIGN_OR_RETURN(backend, dispatcher.BackendFor(spec.device));
  Tensor tensor;
  ASSIGN_OR_RETURN(tensor,
                   backend->Allocate(spec.dtype, spec.shape, spec.device, session.account()));
  const bool host_memory = IsHostMemory(tensor);
  return PendingPut(dispatcher, std::move(spec), std::move(tensor), host_memory);
}

absl::Status PendingPut::Append(absl::string_view chunk) {
  const int64_t len = static_cast<int64_t>(chunk.size());
  if (len > expected_ - received_) {
    return Error(
        Reason::kTransferIncomplete,
        absl::StrCat("put: received more than the ", expected_, " bytes the header announced (",
                     received_, " + ", len, "); nothing was stored"),
        {{"expected_bytes", Str(expected_)}, {"received_bytes", Str(received_ + len)}});
  }
  if (len == 0) return absl::OkStatus();
  if (host_memory_) {
    std::memcpy(static_cast<char*>(tensor_.raw()) + received_, chunk.data(), chunk.size());
  } else {
    staging_.append(chunk.data(), chunk.size());
  }
  received_ += len;
  return absl::OkStatus();
}

absl::Status PendingPut::Fill(const std::function<absl::Status(char* dst, int64_t n)>& read) {
  if (received_ != 0) {
    return Error(Reason::kInternal, "put: a filled put already received chunks");
  }
  char* dst;
  if (host_memory_) {
    dst = static_cast<char*>(tensor_.raw());
  } else {
    staging_.resize(static_cast<size_t>(expected_));
    dst = staging_.data();
  }
  if (expected_ > 0) RETURN_IF_ERROR(read(dst, expected_));
  received_ = expected_;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> PendingPut::Finish(Session& session) {
  if (received_ != expected_) {
    return Error(Reason::kTransferIncomplete,
                 absl::StrCat("put: the stream ended after ", received_, " of ", expected_,
                              " bytes; nothing was stored"),
                 {{"expected_bytes", Str(expected_)}, {"received_bytes", Str(received_)}});
  }
  RETURN_IF_ERROR(session.CheckLive());
  if (!host_memory_) {
    Backend* backend;
    ASSIGN_OR_RETURN(backend, dispatcher_->BackendFor(tensor_.device()));
    RETURN_IF_ERROR(backend->CopyFromHost(staging_.data(), staging_.size(), tensor_));
    std::string().swap(staging_);
  }
  if (spec_.requires_grad) {
    // The context may have been closed while the data streamed in.
    RETURN_IF_ERROR(session.OpenContextForLeaf(spec_.context_id, "put").status());
    tensor_.set_autograd(MakeLeafMeta(spec_.context_id, 0));
  }
  return session.Store(tensor_);
}

absl::StatusOr<TensorReader> TensorReader::Open(const Session& session,
                                                const Dispatcher& dispatcher, uint64_t handle) {
  Tensor t;
  ASSIGN_OR_RETURN(t, session.Get(handle));
  RETURN_IF_ERROR(dispatcher.BackendFor(t.device()).status());
  const bool host_memory = IsHostMemory(t);
  TensorReader reader(dispatcher, handle, std::move(t), host_memory);
  reader.version_ = reader.tensor_.storage() ? reader.tensor_.storage()->version() : 0;
  return reader;
}

absl::Status TensorReader::Read(int64_t offset, int64_t n, std::string* out) {
  if (offset < 0 || n < 0 || offset + n > nbytes()) {
    return Error(Reason::kInternal,
                 absl::StrCat("get: read of [", offset, ", ", offset + n, ") outside the ",
                              nbytes(), " bytes of tensor ", handle_));
  }
  absl::string_view bytes;
  ASSIGN_OR_RETURN(bytes, Bytes());
  out->assign(bytes.data() + offset, static_cast<size_t>(n));
  return absl::OkStatus();
}

absl::StatusOr<absl::string_view> TensorReader::Bytes() {
  if (tensor_.storage() && tensor_.storage()->version() != version_) {
    return Error(Reason::kInvalidRequest,
                 absl::StrCat("get: tensor ", handle_,
                              " was modified in place (assign) during the download; retry"),
                 {{"tensor_id", absl::StrCat(handle_)}});
  }
  const char* base;
  if (host_memory_) {
    base = static_cast<const char*>(tensor_.raw());
  } else {
    if (staging_.size() != tensor_.nbytes()) {
      staging_.resize(tensor_.nbytes());
      RETURN_IF_ERROR(dispatcher_->ToHost(tensor_, staging_.data()));
    }
    base = staging_.data();
  }
  return absl::string_view(base, tensor_.nbytes());
}

}  // namespace tensord
