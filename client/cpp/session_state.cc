// SessionState: what Session, Tensor, Batch and AutodiffContext share.
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "client/cpp/internal.h"
#include "client/cpp/status.h"

namespace tensord::client {
namespace internal {

absl::Status NoSession() {
  return ClientError(::tensord::v1::SESSION_NOT_FOUND, "client: the session object was moved from",
                     {{"session_id", ""}});
}

void ReserveTensorBytes(std::string& bytes, size_t n) {
  bytes.reserve(n);
  constexpr size_t kHugePage = size_t{2} << 20;
  if (n < 2 * kHugePage) return;
  // madvise takes whole pages: the huge-page-aligned part of the buffer. Advice only; a
  // kernel without transparent huge pages refuses it and the buffer works as before.
  const uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data());
  const uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t last = (begin + n) & ~(kHugePage - 1);
  if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

absl::Status ServerAnswer(ErrorReason reason, const std::string& message,
                          std::map<std::string, std::string> metadata) {
  return ClientErrorIn("tensord", reason, message, std::move(metadata));
}

absl::StatusOr<uint64_t> HandleIn(const SessionState& state, const Tensor& t,
                                  std::map<std::string, std::string> where) {
  const std::string handle = absl::StrCat(t.handle());
  where.emplace("tensor_id", handle);
  // An undefined tensor names handle 0, which no session has.
  if (!t.defined()) {
    return ServerAnswer(::tensord::v1::TENSOR_NOT_FOUND, "client: an undefined tensor (no handle)",
                        std::move(where));
  }
  // Sessions are told apart by id: an attached Session shares its server session.
  if (t.session_state()->id() != state.id()) {
    return ServerAnswer(::tensord::v1::TENSOR_NOT_FOUND,
                        absl::StrCat("client: tensor ", handle, " belongs to session ",
                                     t.session_state()->id(), ", not to session ", state.id()),
                        std::move(where));
  }
  if (t.released()) {
    return ServerAnswer(::tensord::v1::TENSOR_NOT_FOUND,
                        absl::StrCat("client: tensor ", handle, " was released"), std::move(where));
  }
  return t.handle();
}

absl::Status SessionState::CheckOpen() const {
  if (!closed()) return absl::OkStatus();
  return ServerAnswer(::tensord::v1::SESSION_NOT_FOUND,
                      absl::StrCat("client: session ", id(), " was closed"),
                      {{"session_id", id()}});
}

SessionState::SessionState(std::shared_ptr<const Connection> connection,
                           const ::tensord::v1::CreateSessionResponse& created, bool owned,
                           std::string affinity_key)
    : connection_(std::move(connection)),
      created_(created),
      affinity_key_(std::move(affinity_key)),
      owned_(owned) {}

void SessionState::Prepare(grpc::ClientContext* context) const {
  connection_->Prepare(context);
  if (!affinity_key_.empty()) context->AddMetadata(kSessionMetadataKey, affinity_key_);
}

absl::StatusOr<::tensord::v1::ExecuteResponse> SessionState::Execute(
    ::tensord::v1::ExecuteRequest& request) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  request.set_session_id(id());
  if (no_grad()) request.set_no_grad(true);
  grpc::ClientContext context;
  Prepare(&context);
  ::tensord::v1::ExecuteResponse response;
  grpc::Status status = stub().Execute(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<HostTensor> SessionState::Get(
    uint64_t handle, uint32_t chunk_bytes,
    const std::function<void(uint64_t, uint64_t)>& progress) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  grpc::ClientContext context;
  Prepare(&context);
  ::tensord::v1::GetTensorRequest request;
  request.set_session_id(id());
  request.set_handle(handle);
  request.set_chunk_bytes(chunk_bytes);
  std::unique_ptr<grpc::ClientReader<::tensord::v1::GetTensorResponse>> reader =
      stub().GetTensor(&context, request);
  ::tensord::v1::GetTensorResponse message;
  ::tensord::v1::TensorInfo info;
  bool have_info = false;
  std::string bytes;
  while (reader->Read(&message)) {
    if (message.has_info() && !have_info) {
      info = message.info();
      have_info = true;
      ReserveTensorBytes(bytes, info.nbytes());
    }
    bytes += message.chunk();
    if (progress && have_info && !message.chunk().empty()) progress(bytes.size(), info.nbytes());
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (!have_info) {
    return ClientError(
        ::tensord::v1::INTERNAL,
        absl::StrCat("client: the GetTensor stream of handle ", handle, " carried no tensor info"),
        {{"tensor_id", absl::StrCat(handle)}});
  }
  absl::StatusOr<DType> dtype = DTypeFromProto(info.dtype());
  if (!dtype.ok()) return dtype.status();
  const size_t received = bytes.size();
  HostTensor out(*dtype, Shape(info.shape().begin(), info.shape().end()), std::move(bytes));
  if (absl::Status s = out.Validate(); !s.ok()) {
    const int64_t n = NumElements(out.shape());
    return ClientError(::tensord::v1::TRANSFER_INCOMPLETE,
                       absl::StrCat("client: GetTensor of handle ", handle, ": ", s.message()),
                       {{"tensor_id", absl::StrCat(handle)},
                        {"received_bytes", absl::StrCat(received)},
                        {"expected_bytes", absl::StrCat(n < 0 ? 0 : n * DTypeSize(*dtype))}});
  }
  return out;
}

absl::StatusOr<uint32_t> SessionState::Release(const std::vector<uint64_t>& handles) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  grpc::ClientContext context;
  Prepare(&context);
  ::tensord::v1::ReleaseRequest request;
  request.set_session_id(id());
  request.mutable_handles()->Add(handles.begin(), handles.end());
  ::tensord::v1::ReleaseResponse response;
  grpc::Status status = stub().Release(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.released();
}

void SessionState::QueueRelease(uint64_t handle, uint64_t nbytes) {
  if (closed()) return;
  bool flush = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (forgotten_.erase(handle) > 0) return;
    pending_.push_back(handle);
    pending_bytes_ += nbytes;
    flush = pending_.size() >= kReleaseBatchCount || pending_bytes_ >= kReleaseBatchBytes;
  }
  // A destructor has no caller to report to; a failure leaves the handle to the session's end.
  if (flush) FlushReleases().IgnoreError();
}

void SessionState::ForgetHandles(const std::vector<uint64_t>& handles) {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t h : handles) {
    auto queued = std::find(pending_.begin(), pending_.end(), h);
    if (queued != pending_.end()) {
      pending_.erase(queued);
    } else {
      forgotten_.insert(h);
    }
  }
}

absl::Status SessionState::FlushReleases() {
  std::vector<uint64_t> handles;
  {
    std::lock_guard<std::mutex> lock(mu_);
    handles.swap(pending_);
    pending_bytes_ = 0;
  }
  if (handles.empty() || closed()) return absl::OkStatus();
  absl::StatusOr<uint32_t> released = Release(handles);
  if (released.ok()) return absl::OkStatus();
  if (ReasonOf(released.status()) == ::tensord::v1::TENSOR_NOT_FOUND) {
    // Release is atomic: one handle freed another way (Session::Release with raw handles)
    // fails the whole batch, so the others go one at a time.
    for (uint64_t h : handles) Release({h}).IgnoreError();
    return absl::OkStatus();
  }
  // The session is gone (closed or expired): so are its tensors.
  if (ReasonOf(released.status()) == ::tensord::v1::SESSION_NOT_FOUND) return absl::OkStatus();
  return released.status();
}

std::vector<std::vector<Tensor>> AdoptOutputs(const std::shared_ptr<SessionState>& state,
                                              const ::tensord::v1::ExecuteResponse& response) {
  std::vector<std::vector<Tensor>> out;
  out.reserve(response.results_size());
  for (const ::tensord::v1::CallResult& result : response.results()) {
    std::vector<Tensor>& outputs = out.emplace_back();
    for (const ::tensord::v1::TensorInfo& info : result.outputs()) {
      outputs.push_back(Tensor::Adopt(state, TensorInfo::FromProto(info)));
    }
  }
  return out;
}

void FillCall(::tensord::v1::OpCall* call, const std::string& op,
              const std::vector<Operand>& inputs, const Attrs& attrs, const SessionState* state,
              absl::Status* error, int call_index) {
  call->set_op(op);
  for (size_t i = 0; i < inputs.size(); ++i) {
    ::tensord::v1::Operand* out = call->add_inputs();
    absl::Status s;
    if (const Tensor* t = inputs[i].tensor(); t != nullptr && state != nullptr) {
      // Where the server would name the operand: call, input and op.
      absl::StatusOr<uint64_t> handle = HandleIn(
          *state, *t,
          {{"call_index", absl::StrCat(call_index)}, {"input_index", absl::StrCat(i)}, {"op", op}});
      s = handle.status();
      if (handle.ok()) out->set_handle(*handle);
    } else {
      s = inputs[i].ToProto(out);
    }
    if (!s.ok() && error->ok()) *error = s;
  }
  for (const auto& [name, value] : attrs) (*call->mutable_attrs())[name] = value.proto();
}

absl::StatusOr<std::vector<Tensor>> ExecuteOneCall(const std::shared_ptr<SessionState>& state,
                                                   ::tensord::v1::ExecuteRequest& request) {
  absl::StatusOr<::tensord::v1::ExecuteResponse> response = state->Execute(request);
  if (!response.ok()) return response.status();
  std::vector<std::vector<Tensor>> outputs = AdoptOutputs(state, *response);
  if (outputs.size() != 1) {
    return ClientError(
        ::tensord::v1::INTERNAL,
        absl::StrCat("client: Execute of one call returned ", outputs.size(), " results"));
  }
  return std::move(outputs[0]);
}

absl::StatusOr<Tensor> OnlyOutput(const std::string& op,
                                  absl::StatusOr<std::vector<Tensor>> outputs) {
  if (!outputs.ok()) return outputs.status();
  if (outputs->size() != 1) {
    return ClientError(::tensord::v1::INVALID_REQUEST,
                       absl::StrCat("client: ", op, " returned ", outputs->size(),
                                    " outputs; use Op() for multi-output ops"),
                       {{"op", op}});
  }
  return std::move((*outputs)[0]);
}

}  // namespace internal

}  // namespace tensord::client
