#include "client/cpp/ops.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "client/cpp/internal.h"
#include "client/cpp/status.h"

namespace tensord::client {
namespace {

Attrs Dims(const std::vector<int64_t>& dims, bool keepdim) {
  Attrs attrs;
  if (!dims.empty()) attrs.emplace("dim", dims);
  if (keepdim) attrs.emplace("keepdim", true);
  return attrs;
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> Op(const std::string& op, std::vector<Operand> inputs,
                                       const Attrs& attrs) {
  std::shared_ptr<internal::SessionState> state;
  for (const Operand& operand : inputs) {
    const Tensor* t = operand.tensor();
    // The first failed operand expression wins, as if the operands were evaluated in order;
    // FillCall refuses the operands the server would refuse.
    if (t == nullptr) {
      if (absl::Status s = operand.status(); !s.ok()) return s;
    } else if (t->defined() && !state) {
      state = t->session_state();
    }
  }
  if (!state) {
    return ClientError(::tensord::v1::BAD_OPERAND,
                       absl::StrCat("client: ", op,
                                    " has no tensor operand to name its session; use "
                                    "Session::Op"),
                       {{"op", op}});
  }
  ::tensord::v1::ExecuteRequest request;
  absl::Status error;
  internal::FillCall(request.add_calls(), op, inputs, attrs, state.get(), &error);
  if (!error.ok()) return error;
  return internal::ExecuteOneCall(state, request);
}

TensorOr Op1(const std::string& op, std::vector<Operand> inputs, const Attrs& attrs) {
  return internal::OnlyOutput(op, Op(op, std::move(inputs), attrs));
}

TensorOr Add(const Operand& a, const Operand& b, double alpha) {
  if (alpha == 1.0) return Op1("add", {a, b});
  return Op1("add", {a, b}, {{"alpha", alpha}});
}
TensorOr Sub(const Operand& a, const Operand& b, double alpha) {
  if (alpha == 1.0) return Op1("sub", {a, b});
  return Op1("sub", {a, b}, {{"alpha", alpha}});
}
TensorOr Mul(const Operand& a, const Operand& b) { return Op1("mul", {a, b}); }
TensorOr Div(const Operand& a, const Operand& b, const std::string& rounding_mode) {
  if (rounding_mode.empty()) return Op1("div", {a, b});
  return Op1("div", {a, b}, {{"rounding_mode", rounding_mode}});
}
TensorOr Pow(const Operand& a, const Operand& b) { return Op1("pow", {a, b}); }
TensorOr Maximum(const Operand& a, const Operand& b) { return Op1("maximum", {a, b}); }
TensorOr Minimum(const Operand& a, const Operand& b) { return Op1("minimum", {a, b}); }
TensorOr Where(const Operand& condition, const Operand& a, const Operand& b) {
  return Op1("where", {condition, a, b});
}

TensorOr Neg(const Operand& a) { return Op1("neg", {a}); }
TensorOr Abs(const Operand& a) { return Op1("abs", {a}); }
TensorOr Exp(const Operand& a) { return Op1("exp", {a}); }
TensorOr Log(const Operand& a) { return Op1("log", {a}); }
TensorOr Sqrt(const Operand& a) { return Op1("sqrt", {a}); }
TensorOr Square(const Operand& a) { return Op1("square", {a}); }
TensorOr Relu(const Operand& a) { return Op1("relu", {a}); }
TensorOr Sigmoid(const Operand& a) { return Op1("sigmoid", {a}); }
TensorOr Tanh(const Operand& a) { return Op1("tanh", {a}); }
TensorOr Gelu(const Operand& a, const std::string& approximate) {
  return Op1("gelu", {a}, {{"approximate", approximate}});
}
TensorOr Softmax(const Operand& a, int64_t dim) { return Op1("softmax", {a}, {{"dim", dim}}); }
TensorOr LogSoftmax(const Operand& a, int64_t dim) {
  return Op1("log_softmax", {a}, {{"dim", dim}});
}

TensorOr Sum(const Operand& a, const std::vector<int64_t>& dims, bool keepdim) {
  return Op1("sum", {a}, Dims(dims, keepdim));
}
TensorOr Mean(const Operand& a, const std::vector<int64_t>& dims, bool keepdim) {
  return Op1("mean", {a}, Dims(dims, keepdim));
}
TensorOr Amax(const Operand& a, const std::vector<int64_t>& dims, bool keepdim) {
  return Op1("amax", {a}, Dims(dims, keepdim));
}
TensorOr Argmax(const Operand& a, int64_t dim, bool keepdim) {
  return Op1("argmax", {a}, {{"dim", dim}, {"keepdim", keepdim}});
}

TensorOr Matmul(const Operand& a, const Operand& b) { return Op1("matmul", {a, b}); }
TensorOr Linear(const Operand& x, const Operand& weight, const Operand& bias) {
  return Op1("linear", {x, weight, bias});
}

TensorOr Reshape(const Operand& a, const std::vector<int64_t>& shape) {
  return Op1("reshape", {a}, {{"shape", shape}});
}
TensorOr Transpose(const Operand& a, int64_t dim0, int64_t dim1) {
  return Op1("transpose", {a}, {{"dim0", dim0}, {"dim1", dim1}});
}
TensorOr Permute(const Operand& a, const std::vector<int64_t>& dims) {
  return Op1("permute", {a}, {{"dims", dims}});
}
TensorOr Unsqueeze(const Operand& a, int64_t dim) { return Op1("unsqueeze", {a}, {{"dim", dim}}); }
TensorOr Flatten(const Operand& a, int64_t start_dim, int64_t end_dim) {
  return Op1("flatten", {a}, {{"start_dim", start_dim}, {"end_dim", end_dim}});
}
TensorOr ToDtype(const Operand& a, DType dtype) { return Op1("to_dtype", {a}, {{"dtype", dtype}}); }
TensorOr Detach(const Operand& a) { return Op1("detach", {a}); }
TensorOr Clone(const Operand& a) { return Op1("clone", {a}); }

TensorOr MseLoss(const Operand& input, const Operand& target, const std::string& reduction) {
  return Op1("mse_loss", {input, target}, {{"reduction", reduction}});
}
TensorOr CrossEntropy(const Operand& logits, const Operand& target, const std::string& reduction) {
  return Op1("cross_entropy", {logits, target}, {{"reduction", reduction}});
}

absl::StatusOr<std::vector<Tensor>> Assign(const Operand& target, const Operand& value) {
  return Op("assign", {target, value});
}

TensorOr operator+(const TensorOr& a, const TensorOr& b) { return Add(a, b); }
TensorOr operator+(const TensorOr& a, double b) { return Add(a, b); }
TensorOr operator+(double a, const TensorOr& b) { return Add(a, b); }
TensorOr operator-(const TensorOr& a, const TensorOr& b) { return Sub(a, b); }
TensorOr operator-(const TensorOr& a, double b) { return Sub(a, b); }
TensorOr operator-(double a, const TensorOr& b) { return Sub(a, b); }
TensorOr operator*(const TensorOr& a, const TensorOr& b) { return Mul(a, b); }
TensorOr operator*(const TensorOr& a, double b) { return Mul(a, b); }
TensorOr operator*(double a, const TensorOr& b) { return Mul(a, b); }
TensorOr operator/(const TensorOr& a, const TensorOr& b) { return Div(a, b); }
TensorOr operator/(const TensorOr& a, double b) { return Div(a, b); }
TensorOr operator/(double a, const TensorOr& b) { return Div(a, b); }
TensorOr operator-(const TensorOr& a) { return Neg(a); }

}  // namespace tensord::client
