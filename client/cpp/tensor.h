// Tensor: a client-side handle to a tensor stored in a server session.
//
// Design (see also ops.h):
// - A Tensor is a cheap, copyable, shared reference, like torch::Tensor: copies name the same
//   server tensor. When the last copy goes away, its server handle is queued for release; the
//   queue is flushed as one Release RPC once it holds 64 handles or 64 MiB, before
//   Session::Info(), and by Session::FlushReleases(). Closing the session frees everything, so
//   nothing is sent for tensors that outlive their session.
// - A Tensor knows its session, so ops need no session argument: `Relu(Matmul(x, w) + b)`.
// - Every op returns absl::StatusOr<Tensor>, and every op also accepts a StatusOr<Tensor> as an
//   operand, passing the first error through. Expressions therefore compose without checks at
//   each step, and the error of the first failing op comes out at the end, with its reason and
//   metadata intact (see status.h):
//     absl::StatusOr<Tensor> loss = MseLoss(Relu(Matmul(x, w1) + b1), y);
//     if (!loss.ok()) return loss.status();
//   Each op is one round trip; use Session::NewBatch() to send many calls at once.
// - The metadata (dtype, shape, autodiff identity) is known locally from the server's reply,
//   so shape() and dtype() cost nothing; values cost a GetTensor stream (ToHost, ToVector).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cpp/host_tensor.h"
#include "tensord/v1/ops.pb.h"
#include "tensord/v1/tensor.pb.h"

namespace tensord::client {

namespace internal {
class SessionState;
}  // namespace internal

// What the server reported about a stored tensor (tensord.v1.TensorInfo).
struct TensorInfo {
  uint64_t handle = 0;
  DType dtype = DType::kF32;
  Shape shape;
  std::string device;
  bool requires_grad = false;  // an autodiff tensor
  uint64_t context_id = 0;     // its autodiff context, 0 for plain tensors
  bool is_leaf = false;        // a requires-grad leaf (receives a gradient)
  uint64_t nbytes = 0;

  static TensorInfo FromProto(const ::tensord::v1::TensorInfo& info);
  std::string ToString() const;
  friend bool operator==(const TensorInfo& a, const TensorInfo& b);
  friend bool operator!=(const TensorInfo& a, const TensorInfo& b) { return !(a == b); }
};
std::ostream& operator<<(std::ostream& os, const TensorInfo& info);

class Tensor {
 public:
  // An undefined tensor (no handle).
  Tensor() = default;

  bool defined() const { return impl_ != nullptr; }
  uint64_t handle() const { return impl_ ? impl_->info.handle : 0; }
  const TensorInfo& info() const;
  DType dtype() const { return info().dtype; }
  const Shape& shape() const { return info().shape; }
  int64_t dim() const { return static_cast<int64_t>(info().shape.size()); }
  int64_t numel() const { return NumElements(info().shape); }
  const std::string& device() const { return info().device; }
  bool requires_grad() const { return info().requires_grad; }
  bool is_leaf() const { return info().is_leaf; }
  uint64_t context_id() const { return info().context_id; }
  uint64_t nbytes() const { return info().nbytes; }

  // Fetches the value (a GetTensor stream).
  absl::StatusOr<HostTensor> ToHost() const;
  // The value as a vector; T must match the dtype.
  template <typename T>
  absl::StatusOr<std::vector<T>> ToVector() const {
    absl::StatusOr<HostTensor> host = ToHost();
    if (!host.ok()) return host.status();
    return host->ToVector<T>();
  }
  // The value of a one-element tensor, converted to double.
  absl::StatusOr<double> Item() const;

  // Releases the server handle now (one RPC) instead of when the last copy goes. Every copy
  // then names nothing: using it is TENSOR_NOT_FOUND, refused by the client (origin=client).
  absl::Status Release();
  // True once Release() (on any copy) or Session::Release freed the server handle.
  bool released() const { return impl_ && impl_->freed; }
  // Gives up ownership: the handle stays on the server (for a later process to name it) until
  // released by handle or with its session. Returns the handle.
  uint64_t ReleaseOwnership() const {
    MarkReleased();
    return handle();
  }
  // How many Tensor objects share this handle.
  long use_count() const { return impl_.use_count(); }

  // Internal: adopts a handle the server just created in `session`.
  static Tensor Adopt(std::shared_ptr<internal::SessionState> session, TensorInfo info);
  const std::shared_ptr<internal::SessionState>& session_state() const;

 private:
  friend class Session;
  // Nothing is queued when the last copy goes (the handle was given away).
  void MarkReleased() const {
    if (impl_) impl_->released = true;
  }
  // The server handle was freed: nothing is queued, and the tensor may not be used.
  void MarkFreed() const {
    if (impl_) impl_->freed = true;
  }

  struct Impl {
    std::shared_ptr<internal::SessionState> session;
    TensorInfo info;
    bool released = false;  // given away (ReleaseOwnership): still valid on the server
    bool freed = false;     // released on the server
    ~Impl();
  };
  std::shared_ptr<Impl> impl_;
};

// Refers to an output of an earlier call of a Batch (see session.h).
struct CallOutput {
  uint32_t call = 0;
  uint32_t output = 0;
};

// One input of an op: a stored tensor, an output of an earlier call of the same batch, an
// inline literal (a HostTensor, always plain) or a scalar (weaker than any tensor in type
// promotion, as a Python number is in PyTorch). An operand built from a failed
// StatusOr<Tensor> carries its error; the op that receives it fails with that error.
class Operand {
 public:
  Operand(const Tensor& t) : value_(t) {}                      // NOLINT: implicit by design
  Operand(const absl::StatusOr<Tensor>& t);                    // NOLINT
  Operand(CallOutput o) : value_(o) {}                         // NOLINT
  Operand(HostTensor literal) : value_(std::move(literal)) {}  // NOLINT
  Operand(double v) : value_(Number{v}) {}                     // NOLINT
  Operand(int v) : value_(Number{int64_t{v}}) {}               // NOLINT
  Operand(int64_t v) : value_(Number{v}) {}                    // NOLINT
  Operand(bool v) : value_(Number{v}) {}                       // NOLINT
  Operand(const char*) = delete;                               // would silently become a bool

  // A raw handle of the session the op runs in (no ownership taken).
  static Operand Handle(uint64_t handle);
  // Programs only (ProgramBuilder): the value bound to parameter `index` at each run, and
  // in a program's updates the gradient its backward computed for leaf handle `leaf`.
  static Operand Parameter(uint32_t index);
  static Operand GradientOf(uint64_t leaf);

  // The tensor of a tensor operand, or null.
  const Tensor* tensor() const { return std::get_if<Tensor>(&value_); }
  // The error of an operand built from a failed StatusOr.
  absl::Status status() const;
  // Fills `out`; fails for an error operand.
  absl::Status ToProto(::tensord::v1::Operand* out) const;

 private:
  struct Number {
    std::variant<double, int64_t, bool> v;
  };
  struct RawHandle {
    uint64_t handle;
  };
  struct ParameterRef {
    uint32_t index;
  };
  struct GradientRef {
    uint64_t leaf;
  };
  Operand() = default;
  std::variant<Tensor, CallOutput, HostTensor, Number, RawHandle, absl::Status, ParameterRef,
               GradientRef>
      value_;
};

// An op attribute (tensord.v1.AttrValue). Lists of ints may be written as braced lists:
//   {{"dim", {0, 1}}, {"keepdim", true}, {"dtype", DType::kF64}}
class AttrValue {
 public:
  AttrValue(bool v) { proto_.set_b(v); }                       // NOLINT
  AttrValue(int v) { proto_.set_i(v); }                        // NOLINT
  AttrValue(int64_t v) { proto_.set_i(v); }                    // NOLINT
  AttrValue(double v) { proto_.set_f(v); }                     // NOLINT
  AttrValue(const char* v) { proto_.set_s(v); }                // NOLINT
  AttrValue(std::string v) { proto_.set_s(std::move(v)); }     // NOLINT
  AttrValue(DType v) { proto_.set_s(DTypeName(v)); }           // NOLINT
  AttrValue(std::initializer_list<int64_t> v);                 // NOLINT
  AttrValue(const std::vector<int64_t>& v);                    // NOLINT
  AttrValue(const std::vector<double>& v);                     // NOLINT
  AttrValue(const ::tensord::v1::AttrValue& v) : proto_(v) {}  // NOLINT

  const ::tensord::v1::AttrValue& proto() const { return proto_; }

 private:
  ::tensord::v1::AttrValue proto_;
};
using Attrs = std::map<std::string, AttrValue>;

}  // namespace tensord::client
