#include "client/cpp/tensor.h"

#include "absl/strings/str_cat.h"
#include "client/cpp/internal.h"
#include "client/cpp/status.h"

namespace tensord::client {

TensorInfo TensorInfo::FromProto(const ::tensord::v1::TensorInfo& info) {
  TensorInfo out;
  out.handle = info.handle();
  // An unknown dtype from a newer server keeps the raw number.
  out.dtype = static_cast<DType>(info.dtype());
  out.shape.assign(info.shape().begin(), info.shape().end());
  out.device = info.device();
  out.requires_grad = info.requires_grad();
  out.context_id = info.context_id();
  out.is_leaf = info.is_leaf();
  out.nbytes = info.nbytes();
  return out;
}

std::string TensorInfo::ToString() const {
  std::string out = absl::StrCat("tensor ", handle, " ", DTypeName(dtype), ShapeString(shape),
                                 " on ", device, " (", nbytes, " bytes)");
  if (requires_grad) {
    absl::StrAppend(&out, " autodiff of context ", context_id, is_leaf ? ", leaf" : "");
  }
  return out;
}

bool operator==(const TensorInfo& a, const TensorInfo& b) {
  return a.handle == b.handle && a.dtype == b.dtype && a.shape == b.shape && a.device == b.device &&
         a.requires_grad == b.requires_grad && a.context_id == b.context_id &&
         a.is_leaf == b.is_leaf && a.nbytes == b.nbytes;
}

std::ostream& operator<<(std::ostream& os, const TensorInfo& info) { return os << info.ToString(); }

Tensor::Impl::~Impl() {
  if (!released && !freed && session != nullptr) session->QueueRelease(info.handle, info.nbytes);
}

const TensorInfo& Tensor::info() const {
  static const TensorInfo* const kUndefined = new TensorInfo();
  return impl_ ? impl_->info : *kUndefined;
}

Tensor Tensor::Adopt(std::shared_ptr<internal::SessionState> session, TensorInfo info) {
  Tensor t;
  t.impl_ = std::make_shared<Impl>();
  t.impl_->session = std::move(session);
  t.impl_->info = std::move(info);
  return t;
}

const std::shared_ptr<internal::SessionState>& Tensor::session_state() const {
  static const std::shared_ptr<internal::SessionState>* const kNone =
      new std::shared_ptr<internal::SessionState>();
  return impl_ ? impl_->session : *kNone;
}

absl::StatusOr<HostTensor> Tensor::ToHost() const {
  if (!impl_) {
    return internal::ServerAnswer(::tensord::v1::TENSOR_NOT_FOUND,
                                  "client: ToHost on an undefined tensor", {{"tensor_id", "0"}});
  }
  absl::StatusOr<uint64_t> handle = internal::HandleIn(*impl_->session, *this, {});
  if (!handle.ok()) return handle.status();
  return impl_->session->Get(*handle, 0);
}

absl::StatusOr<double> Tensor::Item() const {
  if (defined() && numel() != 1) {
    return ClientError(::tensord::v1::SHAPE_MISMATCH,
                       absl::StrCat("client: Item() needs one element, tensor ", handle(),
                                    " has shape ", ShapeString(shape())),
                       {{"shape", ShapeString(shape())}});
  }
  absl::StatusOr<HostTensor> host = ToHost();
  if (!host.ok()) return host.status();
  return host->ToDoubles().at(0);
}

absl::Status Tensor::Release() {
  if (!impl_ || impl_->released || impl_->freed) return absl::OkStatus();
  absl::StatusOr<uint32_t> released = impl_->session->Release({impl_->info.handle});
  if (!released.ok()) return released.status();
  impl_->freed = true;
  return absl::OkStatus();
}

Operand::Operand(const absl::StatusOr<Tensor>& t) {
  if (t.ok()) {
    value_ = *t;
  } else {
    value_ = t.status();
  }
}

Operand Operand::Handle(uint64_t handle) {
  Operand out;
  out.value_ = RawHandle{handle};
  return out;
}

Operand Operand::Parameter(uint32_t index) {
  Operand out;
  out.value_ = ParameterRef{index};
  return out;
}

Operand Operand::GradientOf(uint64_t leaf) {
  Operand out;
  out.value_ = GradientRef{leaf};
  return out;
}

absl::Status Operand::status() const {
  if (const absl::Status* s = std::get_if<absl::Status>(&value_)) return *s;
  if (const Tensor* t = std::get_if<Tensor>(&value_); t != nullptr && !t->defined()) {
    // An undefined tensor names handle 0, which no session has.
    return internal::ServerAnswer(::tensord::v1::TENSOR_NOT_FOUND,
                                  "client: an operand is an undefined tensor",
                                  {{"tensor_id", "0"}});
  }
  return absl::OkStatus();
}

absl::Status Operand::ToProto(::tensord::v1::Operand* out) const {
  if (absl::Status s = status(); !s.ok()) return s;
  if (const Tensor* t = std::get_if<Tensor>(&value_)) {
    out->set_handle(t->handle());
  } else if (const CallOutput* c = std::get_if<CallOutput>(&value_)) {
    out->mutable_call_output()->set_call(c->call);
    out->mutable_call_output()->set_output(c->output);
  } else if (const HostTensor* h = std::get_if<HostTensor>(&value_)) {
    *out->mutable_literal() = h->ToProto();
  } else if (const Number* n = std::get_if<Number>(&value_)) {
    ::tensord::v1::Scalar* s = out->mutable_scalar();
    if (const double* f = std::get_if<double>(&n->v)) s->set_f(*f);
    if (const int64_t* i = std::get_if<int64_t>(&n->v)) s->set_i(*i);
    if (const bool* b = std::get_if<bool>(&n->v)) s->set_b(*b);
  } else if (const RawHandle* r = std::get_if<RawHandle>(&value_)) {
    out->set_handle(r->handle);
  } else if (const ParameterRef* p = std::get_if<ParameterRef>(&value_)) {
    out->set_parameter(p->index);
  } else if (const GradientRef* g = std::get_if<GradientRef>(&value_)) {
    out->set_gradient(g->leaf);
  }
  return absl::OkStatus();
}

AttrValue::AttrValue(std::initializer_list<int64_t> v) {
  proto_.mutable_ints()->mutable_values()->Add(v.begin(), v.end());
}

AttrValue::AttrValue(const std::vector<int64_t>& v) {
  proto_.mutable_ints()->mutable_values()->Add(v.begin(), v.end());
}

AttrValue::AttrValue(const std::vector<double>& v) {
  proto_.mutable_floats()->mutable_values()->Add(v.begin(), v.end());
}

}  // namespace tensord::client
