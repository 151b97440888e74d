#include "client/cpp/session.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpp/internal.h"
#include "client/cpp/program.h"
#include "client/cpp/status.h"

namespace tensord::client {

// ---- info structs -----------------------------------------------------------------------------

bool operator==(const ContextInfo& a, const ContextInfo& b) {
  return a.context_id == b.context_id && a.checkpointing == b.checkpointing && a.state == b.state &&
         a.tape_nodes == b.tape_nodes && a.saved_bytes == b.saved_bytes;
}

std::ostream& operator<<(std::ostream& os, const ContextInfo& c) {
  return os << "context " << c.context_id << " (" << c.checkpointing << ", " << c.state << ", "
            << c.tape_nodes << " tape nodes, " << c.saved_bytes << " saved bytes)";
}

bool operator==(const ProgramInfo& a, const ProgramInfo& b) {
  return a.program_id == b.program_id && a.parameters == b.parameters && a.calls == b.calls &&
         a.updates == b.updates && a.context_id == b.context_id && a.backward == b.backward &&
         a.runs == b.runs;
}

const ContextInfo* SessionInfo::context(uint64_t id) const {
  for (const ContextInfo& c : contexts) {
    if (c.context_id == id) return &c;
  }
  return nullptr;
}

std::string SessionInfo::ToString() const {
  std::string out = absl::StrCat(
      "session ", session_id, " on ", device, ": ", memory_used_bytes, "/", memory_quota_bytes,
      " bytes, ttl ", ttl_seconds, " s", autodiff_enabled ? "" : ", autodiff disabled",
      float32_matmul_precision == "highest"
          ? ""
          : absl::StrCat(", float32 matmul precision ", float32_matmul_precision));
  for (const TensorInfo& t : tensors) absl::StrAppend(&out, "\n  ", t.ToString());
  for (const ContextInfo& c : contexts) {
    absl::StrAppend(&out, "\n  context ", c.context_id, " (", c.checkpointing, ", ", c.state, ", ",
                    c.tape_nodes, " tape nodes, ", c.saved_bytes, " saved bytes)");
  }
  for (const ProgramInfo& p : programs) {
    absl::StrAppend(&out, "\n  program ", p.program_id, " (", p.parameters, " parameters, ",
                    p.calls, " calls, ", p.updates, " updates, ",
                    p.backward ? absl::StrCat("backward in context ", p.context_id) : "no backward",
                    ", ", p.runs, " runs)");
  }
  for (const SharedMemoryInfo& r : shared_memory) {
    absl::StrAppend(&out, "\n  shared memory ", r.name, " (", r.key, " [", r.offset, ", ",
                    r.offset + r.byte_size, "))");
  }
  if (group) {
    absl::StrAppend(&out, "\n  group ", group->name, " (rank ", group->rank, " of ",
                    group->world_size, ", ", group->backend, ")");
  }
  return out;
}

bool operator==(const SessionInfo& a, const SessionInfo& b) {
  return a.session_id == b.session_id && a.device == b.device &&
         a.memory_used_bytes == b.memory_used_bytes &&
         a.memory_quota_bytes == b.memory_quota_bytes && a.ttl_seconds == b.ttl_seconds &&
         a.autodiff_enabled == b.autodiff_enabled &&
         a.float32_matmul_precision == b.float32_matmul_precision && a.tensors == b.tensors &&
         a.contexts == b.contexts && a.programs == b.programs &&
         a.shared_memory == b.shared_memory && a.group == b.group;
}

std::ostream& operator<<(std::ostream& os, const SessionInfo& info) {
  return os << info.ToString();
}

// ---- Batch ------------------------------------------------------------------------------------

Batch::Batch(std::shared_ptr<internal::SessionState> state, BatchOptions options)
    : state_(std::move(state)), options_(options) {}

CallRef Batch::Add(const std::string& op, std::vector<Operand> inputs, const Attrs& attrs,
                   const CallOptions& options) {
  const int index = request_.calls_size();
  ::tensord::v1::OpCall* call = request_.add_calls();
  internal::FillCall(call, op, inputs, attrs, state_.get(), &error_, index);
  call->set_requires_grad(options.requires_grad);
  call->set_fetch(options.fetch);
  call->set_discard(options.discard);
  for (const Operand& operand : inputs) {
    if (const Tensor* t = operand.tensor()) keep_alive_.push_back(*t);
  }
  return CallRef(static_cast<uint32_t>(request_.calls_size() - 1));
}

absl::StatusOr<BatchResult> Batch::Run() {
  if (!state_) return internal::NoSession();
  if (!error_.ok()) return error_;
  request_.set_no_grad(options_.no_grad);
  request_.set_context_id(options_.context);
  absl::StatusOr<::tensord::v1::ExecuteResponse> response = state_->Execute(request_);
  if (!response.ok()) return response.status();
  BatchResult result;
  result.outputs_ = internal::AdoptOutputs(state_, *response);
  for (::tensord::v1::CallResult& call : *response->mutable_results()) {
    std::vector<HostTensor>& values = result.values_.emplace_back();
    for (::tensord::v1::TensorData& data : *call.mutable_values()) {
      absl::StatusOr<HostTensor> value = HostTensor::FromProto(std::move(data));
      if (!value.ok()) return value.status();
      values.push_back(std::move(*value));
    }
  }
  return result;
}

// ---- Session ----------------------------------------------------------------------------------

Session& Session::operator=(Session&& other) noexcept {
  if (this != &other) {
    if (state_ && state_->owned()) Close().IgnoreError();
    state_ = std::move(other.state_);
  }
  return *this;
}

Session::~Session() {
  if (state_ && state_->owned()) Close().IgnoreError();
}

const std::string& Session::id() const { return state_->id(); }
const std::string& Session::device() const { return state_->created().device(); }
uint64_t Session::ttl_seconds() const { return state_->created().ttl_seconds(); }
uint64_t Session::memory_quota_bytes() const { return state_->created().memory_quota_bytes(); }
bool Session::autodiff_enabled() const { return state_->created().autodiff_enabled(); }
const std::string& Session::float32_matmul_precision() const {
  return state_->created().float32_matmul_precision();
}

absl::StatusOr<Tensor> Session::Put(const HostTensor& value, const PutOptions& options) {
  if (!state_) return internal::NoSession();
  if (absl::Status s = value.Validate(); !s.ok()) return s;
  if (absl::Status s = state_->CheckOpen(); !s.ok()) return s;
  grpc::ClientContext context;
  state_->Prepare(&context);
  ::tensord::v1::PutTensorResponse response;
  std::unique_ptr<grpc::ClientWriter<::tensord::v1::PutTensorRequest>> writer =
      state_->stub().PutTensor(&context, &response);
  ::tensord::v1::PutTensorRequest message;
  ::tensord::v1::PutHeader* header = message.mutable_header();
  header->set_session_id(state_->id());
  header->set_dtype(ToProto(value.dtype()));
  for (int64_t d : value.shape()) header->add_shape(d);
  header->set_device(options.device);
  header->set_requires_grad(options.requires_grad);
  header->set_context_id(options.context);
  // A failed Write means the server already ended the call; Finish() says why.
  bool open = writer->Write(message);
  const size_t chunk = options.chunk_bytes > 0 ? options.chunk_bytes : size_t{1} << 20;
  const std::string& bytes = value.bytes();
  for (size_t offset = 0; open && offset < bytes.size(); offset += chunk) {
    const size_t n = std::min(chunk, bytes.size() - offset);
    message.set_chunk(bytes.data() + offset, n);
    open = writer->Write(message);
    if (open && options.progress) options.progress(offset + n, bytes.size());
  }
  if (open) writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return Tensor::Adopt(state_, TensorInfo::FromProto(response.tensor()));
}

absl::StatusOr<HostTensor> Session::Get(const Tensor& tensor, uint32_t chunk_bytes) {
  return Get(tensor, GetOptions{chunk_bytes, {}});
}

absl::StatusOr<HostTensor> Session::Get(uint64_t handle, uint32_t chunk_bytes) {
  return Get(handle, GetOptions{chunk_bytes, {}});
}

absl::StatusOr<HostTensor> Session::Get(const Tensor& tensor, const GetOptions& options) {
  if (!state_) return internal::NoSession();
  absl::StatusOr<uint64_t> handle = internal::HandleIn(*state_, tensor, {});
  if (!handle.ok()) return handle.status();
  return Get(*handle, options);
}

absl::StatusOr<HostTensor> Session::Get(uint64_t handle, const GetOptions& options) {
  if (!state_) return internal::NoSession();
  return state_->Get(handle, options.chunk_bytes, options.progress);
}

absl::StatusOr<std::vector<Tensor>> Session::Op(const std::string& op, std::vector<Operand> inputs,
                                                const Attrs& attrs, const OpOptions& options) {
  if (!state_) return internal::NoSession();
  ::tensord::v1::ExecuteRequest request;
  absl::Status error;
  ::tensord::v1::OpCall* call = request.add_calls();
  internal::FillCall(call, op, inputs, attrs, state_.get(), &error);
  if (!error.ok()) return error;
  call->set_requires_grad(options.requires_grad);
  request.set_no_grad(options.no_grad);
  request.set_context_id(options.context);
  return internal::ExecuteOneCall(state_, request);
}

absl::StatusOr<Tensor> Session::Op1(const std::string& op, std::vector<Operand> inputs,
                                    const Attrs& attrs, const OpOptions& options) {
  return internal::OnlyOutput(op, Op(op, std::move(inputs), attrs, options));
}

Batch Session::NewBatch(const BatchOptions& options) { return Batch(state_, options); }

ProgramBuilder Session::NewProgram(uint64_t context, bool no_grad) {
  return ProgramBuilder(state_, context, no_grad);
}

NoGradGuard Session::NoGrad() { return NoGradGuard(state_); }

absl::StatusOr<uint32_t> Session::Release(const std::vector<Tensor>& tensors) {
  if (!state_) return internal::NoSession();
  // Release is atomic: every tensor is checked before any handle is sent.
  std::vector<uint64_t> handles;
  for (const Tensor& t : tensors) {
    absl::StatusOr<uint64_t> handle = internal::HandleIn(*state_, t, {});
    if (!handle.ok()) return handle.status();
    handles.push_back(*handle);
  }
  absl::StatusOr<uint32_t> released = Release(handles);
  if (!released.ok()) return released;
  // The handles are gone; the Tensor objects must not queue or name them again.
  for (const Tensor& t : tensors) {
    t.MarkFreed();
  }
  return released;
}

absl::StatusOr<uint32_t> Session::Release(const std::vector<uint64_t>& handles) {
  if (!state_) return internal::NoSession();
  return state_->Release(handles);
}

absl::Status Session::FlushReleases() {
  if (!state_) return internal::NoSession();
  return state_->FlushReleases();
}

const std::string& Session::affinity_key() const {
  static const std::string* none = new std::string();
  return state_ ? state_->affinity_key() : *none;
}

absl::StatusOr<uint64_t> Session::KeepAlive() {
  if (!state_) return internal::NoSession();
  if (absl::Status s = state_->CheckOpen(); !s.ok()) return s;
  grpc::ClientContext context;
  state_->Prepare(&context);
  ::tensord::v1::KeepAliveRequest request;
  request.set_session_id(state_->id());
  ::tensord::v1::KeepAliveResponse response;
  grpc::Status status = state_->stub().KeepAlive(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.ttl_seconds();
}

absl::StatusOr<SessionInfo> Session::Info() {
  if (!state_) return internal::NoSession();
  if (absl::Status s = state_->CheckOpen(); !s.ok()) return s;
  // A failed flush (e.g. the session expired) is reported by GetSessionInfo itself.
  state_->FlushReleases().IgnoreError();
  grpc::ClientContext context;
  state_->Prepare(&context);
  ::tensord::v1::GetSessionInfoRequest request;
  request.set_session_id(state_->id());
  ::tensord::v1::GetSessionInfoResponse response;
  grpc::Status status = state_->stub().GetSessionInfo(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  SessionInfo out;
  out.session_id = response.session_id();
  out.device = response.device();
  out.memory_used_bytes = response.memory_used_bytes();
  out.memory_quota_bytes = response.memory_quota_bytes();
  out.ttl_seconds = response.ttl_seconds();
  out.autodiff_enabled = response.autodiff_enabled();
  out.float32_matmul_precision = response.float32_matmul_precision();
  for (const auto& t : response.tensors()) out.tensors.push_back(TensorInfo::FromProto(t));
  for (const auto& c : response.contexts()) {
    out.contexts.push_back(
        {c.context_id(), c.checkpointing(), c.state(), c.tape_nodes(), c.saved_bytes()});
  }
  for (const auto& p : response.programs()) {
    out.programs.push_back({p.program_id(), p.parameters(), p.calls(), p.updates(), p.context_id(),
                            p.backward(), p.runs()});
  }
  for (const auto& r : response.shared_memory()) {
    out.shared_memory.push_back({r.name(), r.key(), r.offset(), r.byte_size()});
  }
  if (response.has_group()) {
    const auto& g = response.group();
    out.group = GroupInfo{g.name(), g.rank(), g.world_size(), g.backend()};
  }
  return out;
}

absl::StatusOr<AutodiffContext> Session::OpenAutodiff(Checkpointing checkpointing) {
  if (!state_) return internal::NoSession();
  if (absl::Status s = state_->CheckOpen(); !s.ok()) return s;
  grpc::ClientContext context;
  state_->Prepare(&context);
  ::tensord::v1::OpenAutodiffContextRequest request;
  request.set_session_id(state_->id());
  request.set_checkpointing(checkpointing == Checkpointing::kBalanced
                                ? ::tensord::v1::CHECKPOINTING_BALANCED
                                : ::tensord::v1::CHECKPOINTING_NONE);
  ::tensord::v1::OpenAutodiffContextResponse response;
  grpc::Status status = state_->stub().OpenAutodiffContext(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return AutodiffContext(state_, response.context_id(), checkpointing);
}

absl::Status Session::Close() {
  if (!state_ || state_->closed()) return absl::OkStatus();
  grpc::ClientContext context;
  state_->Prepare(&context);
  ::tensord::v1::CloseSessionRequest request;
  request.set_session_id(state_->id());
  ::tensord::v1::CloseSessionResponse response;
  grpc::Status status = state_->stub().CloseSession(&context, request, &response);
  // Whatever the answer, nothing more is sent for this session's tensors.
  state_->set_closed();
  return FromGrpcStatus(status);
}

void Session::Detach() {
  if (state_) state_->set_owned(false);
}

}  // namespace tensord::client
