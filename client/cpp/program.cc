#include "client/cpp/program.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cpp/internal.h"
#include "client/cpp/status.h"

namespace tensord::client {

ProgramBuilder::ProgramBuilder(std::shared_ptr<internal::SessionState> state, uint64_t context,
                               bool no_grad)
    : state_(std::move(state)) {
  request_.set_context_id(context);
  request_.set_no_grad(no_grad);
}

Operand ProgramBuilder::Parameter(Operand example, const std::string& name) {
  const int index = request_.parameters_size();
  ::tensord::v1::ProgramParameter* param = request_.add_parameters();
  param->set_name(name);
  absl::Status st = example.ToProto(param->mutable_example());
  if (const Tensor* t = example.tensor(); st.ok() && t != nullptr && state_ != nullptr) {
    absl::StatusOr<uint64_t> handle =
        internal::HandleIn(*state_, *t, {{"parameter_index", absl::StrCat(index)}});
    if (handle.ok()) {
      param->mutable_example()->set_handle(*handle);
      keep_alive_.push_back(*t);
    } else {
      st = handle.status();
    }
  }
  if (!st.ok() && error_.ok()) error_ = st;
  return Operand::Parameter(static_cast<uint32_t>(index));
}

CallRef ProgramBuilder::AddTo(::tensord::v1::OpCall* call, const std::string& op,
                              const std::vector<Operand>& inputs, const Attrs& attrs,
                              const ProgramCallOptions& options, int index) {
  internal::FillCall(call, op, inputs, attrs, state_.get(), &error_, index);
  call->set_fetch(options.fetch);
  call->set_keep(options.keep);
  call->set_requires_grad(options.requires_grad);
  for (const Operand& operand : inputs) {
    if (const Tensor* t = operand.tensor()) keep_alive_.push_back(*t);
  }
  return CallRef(static_cast<uint32_t>(index));
}

CallRef ProgramBuilder::Add(const std::string& op, std::vector<Operand> inputs, const Attrs& attrs,
                            const ProgramCallOptions& options) {
  const int index = request_.calls_size();
  if (request_.has_backward() || request_.updates_size() > 0) {
    // Updates are numbered after the forward calls: a forward call added now would renumber
    // every update.
    if (error_.ok()) {
      error_ = internal::ServerAnswer(
          ::tensord::v1::INVALID_REQUEST,
          absl::StrCat("client: program: forward call ", op,
                       " added after the backward or an update; add every forward call first"),
          {{"op", op}, {"call_index", absl::StrCat(index)}});
    }
  }
  return AddTo(request_.add_calls(), op, inputs, attrs, options, index);
}

void ProgramBuilder::Backward(const std::vector<CallOutput>& roots,
                              const std::vector<Tensor>& leaves, bool fetch_gradients) {
  ::tensord::v1::ProgramBackward* backward = request_.mutable_backward();
  for (const CallOutput& root : roots) {
    ::tensord::v1::CallOutput* out = backward->add_roots();
    out->set_call(root.call);
    out->set_output(root.output);
  }
  for (size_t l = 0; l < leaves.size(); ++l) {
    absl::StatusOr<uint64_t> handle =
        state_ ? internal::HandleIn(*state_, leaves[l], {{"leaf_index", absl::StrCat(l)}})
               : absl::StatusOr<uint64_t>(internal::NoSession());
    if (!handle.ok()) {
      if (error_.ok()) error_ = handle.status();
      continue;
    }
    backward->add_leaves(*handle);
    leaves_.push_back(leaves[l]);
  }
  backward->set_fetch_gradients(fetch_gradients);
}

void ProgramBuilder::Reduce(const GradientReduction& reduce) {
  ::tensord::v1::GradientReduction* r = request_.mutable_backward()->mutable_reduce();
  r->Clear();
  r->set_op(reduce.op);
  for (size_t b = 0; b < reduce.buckets.size(); ++b) {
    ::tensord::v1::GradientBucket* bucket = r->add_buckets();
    for (const Tensor& leaf : reduce.buckets[b]) {
      absl::StatusOr<uint64_t> handle =
          state_ ? internal::HandleIn(*state_, leaf, {{"bucket_index", absl::StrCat(b)}})
                 : absl::StatusOr<uint64_t>(internal::NoSession());
      if (!handle.ok()) {
        if (error_.ok()) error_ = handle.status();
        continue;
      }
      bucket->add_leaves(*handle);
      leaves_.push_back(leaf);
    }
  }
}

CallRef ProgramBuilder::Update(const std::string& op, std::vector<Operand> inputs,
                               const Attrs& attrs, const ProgramCallOptions& options) {
  const int index = request_.calls_size() + request_.updates_size();
  return AddTo(request_.add_updates(), op, inputs, attrs, options, index);
}

absl::StatusOr<Program> ProgramBuilder::Compile() {
  if (!state_) return internal::NoSession();
  if (!error_.ok()) return error_;
  if (absl::Status s = state_->CheckOpen(); !s.ok()) return s;
  request_.set_session_id(state_->id());
  grpc::ClientContext context;
  state_->Prepare(&context);
  ::tensord::v1::CompileProgramResponse response;
  grpc::Status status = state_->stub().CompileProgram(&context, request_, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  Program program;
  program.state_ = state_;
  program.id_ = response.program_id();
  // Its runs name these handles: dropping the builder must not queue their release.
  std::vector<Tensor> named = keep_alive_;
  named.insert(named.end(), leaves_.begin(), leaves_.end());
  program.keep_alive_ = std::make_shared<const std::vector<Tensor>>(std::move(named));
  program.fused_calls_ = static_cast<int>(response.fused_calls());
  program.peak_bytes_ = static_cast<int64_t>(response.peak_bytes());
  for (const ::tensord::v1::ProgramCallInfo& call : response.calls()) {
    program.fused_ops_.push_back(call.fused_op());
    std::vector<TensorInfo>& outs = program.compiled_.emplace_back();
    for (const ::tensord::v1::TensorInfo& info : call.outputs()) {
      outs.push_back(TensorInfo::FromProto(info));
    }
  }
  return program;
}

absl::StatusOr<ProgramResult> Program::Run(const std::vector<Operand>& inputs) const {
  if (!state_) return internal::NoSession();
  if (absl::Status s = state_->CheckOpen(); !s.ok()) return s;
  ::tensord::v1::RunProgramRequest request;
  request.set_session_id(state_->id());
  request.set_program_id(id_);
  for (size_t p = 0; p < inputs.size(); ++p) {
    ::tensord::v1::Operand* out = request.add_inputs();
    absl::Status st = inputs[p].ToProto(out);
    if (const Tensor* t = inputs[p].tensor(); st.ok() && t != nullptr) {
      absl::StatusOr<uint64_t> handle =
          internal::HandleIn(*state_, *t, {{"parameter_index", absl::StrCat(p)}});
      if (!handle.ok()) return handle.status();
      out->set_handle(*handle);
    }
    if (!st.ok()) return st;
  }
  grpc::ClientContext context;
  state_->Prepare(&context);
  ::tensord::v1::RunProgramResponse response;
  grpc::Status status = state_->stub().RunProgram(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  ProgramResult result;
  for (::tensord::v1::CallResult& call : *response.mutable_results()) {
    std::vector<Tensor>& outputs = result.outputs_.emplace_back();
    for (const ::tensord::v1::TensorInfo& info : call.outputs()) {
      // Handle 0: fetched, not kept -- nothing of the session to own.
      if (info.handle() != 0) outputs.push_back(Tensor::Adopt(state_, TensorInfo::FromProto(info)));
    }
    std::vector<HostTensor>& values = result.values_.emplace_back();
    for (::tensord::v1::TensorData& data : *call.mutable_values()) {
      absl::StatusOr<HostTensor> value = HostTensor::FromProto(std::move(data));
      if (!value.ok()) return value.status();
      values.push_back(std::move(*value));
    }
  }
  for (::tensord::v1::TensorData& data : *response.mutable_gradients()) {
    absl::StatusOr<HostTensor> value = HostTensor::FromProto(std::move(data));
    if (!value.ok()) return value.status();
    result.gradients_.push_back(std::move(*value));
  }
  return result;
}

absl::Status Program::Release() const {
  if (!state_) return internal::NoSession();
  if (absl::Status s = state_->CheckOpen(); !s.ok()) return s;
  ::tensord::v1::ReleaseProgramRequest request;
  request.set_session_id(state_->id());
  request.set_program_id(id_);
  grpc::ClientContext context;
  state_->Prepare(&context);
  ::tensord::v1::ReleaseProgramResponse response;
  grpc::Status status = state_->stub().ReleaseProgram(&context, request, &response);
  return status.ok() ? absl::OkStatus() : FromGrpcStatus(status);
}

}  // namespace tensord::client
