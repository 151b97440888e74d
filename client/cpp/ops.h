// Eager ops on Tensors. Each function sends one Execute to the session of its first tensor
// operand and returns the output as absl::StatusOr<Tensor>. Operands are Operand values: a
// Tensor, a StatusOr<Tensor> (an error passes straight through, so calls nest without checks),
// a HostTensor literal or a number. Attribute names and defaults follow PyTorch.
//
//   absl::StatusOr<Tensor> h = Relu(Matmul(x, w1) + b1);
//   absl::StatusOr<Tensor> loss = CrossEntropy(Matmul(h, w2) + b2, labels);
//   absl::StatusOr<Tensor> y = 2.0 * x - 1;  // scalars are weak: y keeps x's dtype
//
// Ops without a named function: Op("layer_norm", {x}, {{"normalized_shape", {4}}}).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cpp/tensor.h"

namespace tensord::client {

using TensorOr = absl::StatusOr<Tensor>;

// Any op by name; fails when no operand is a Tensor (use Session::Op for creation ops).
absl::StatusOr<std::vector<Tensor>> Op(const std::string& op, std::vector<Operand> inputs,
                                       const Attrs& attrs = {});
TensorOr Op1(const std::string& op, std::vector<Operand> inputs, const Attrs& attrs = {});

// Elementwise binary (broadcasting; a number is allowed on either side).
TensorOr Add(const Operand& a, const Operand& b, double alpha = 1.0);
TensorOr Sub(const Operand& a, const Operand& b, double alpha = 1.0);
TensorOr Mul(const Operand& a, const Operand& b);
// rounding_mode: "" (true division), "trunc" or "floor".
TensorOr Div(const Operand& a, const Operand& b, const std::string& rounding_mode = "");
TensorOr Pow(const Operand& a, const Operand& b);
TensorOr Maximum(const Operand& a, const Operand& b);
TensorOr Minimum(const Operand& a, const Operand& b);
TensorOr Where(const Operand& condition, const Operand& a, const Operand& b);

// Elementwise unary and activations.
TensorOr Neg(const Operand& a);
TensorOr Abs(const Operand& a);
TensorOr Exp(const Operand& a);
TensorOr Log(const Operand& a);
TensorOr Sqrt(const Operand& a);
TensorOr Square(const Operand& a);
TensorOr Relu(const Operand& a);
TensorOr Sigmoid(const Operand& a);
TensorOr Tanh(const Operand& a);
TensorOr Gelu(const Operand& a, const std::string& approximate = "none");
TensorOr Softmax(const Operand& a, int64_t dim);
TensorOr LogSoftmax(const Operand& a, int64_t dim);

// Reductions; empty dims = all dims.
TensorOr Sum(const Operand& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
TensorOr Mean(const Operand& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
TensorOr Amax(const Operand& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
TensorOr Argmax(const Operand& a, int64_t dim, bool keepdim = false);

// Linear algebra.
TensorOr Matmul(const Operand& a, const Operand& b);
TensorOr Linear(const Operand& x, const Operand& weight, const Operand& bias);

// Shape.
TensorOr Reshape(const Operand& a, const std::vector<int64_t>& shape);
TensorOr Transpose(const Operand& a, int64_t dim0, int64_t dim1);
TensorOr Permute(const Operand& a, const std::vector<int64_t>& dims);
TensorOr Unsqueeze(const Operand& a, int64_t dim);
TensorOr Flatten(const Operand& a, int64_t start_dim = 0, int64_t end_dim = -1);
TensorOr ToDtype(const Operand& a, DType dtype);
// A plain (non-autodiff) tensor with the same value; allowed even when the context is closed.
TensorOr Detach(const Operand& a);
TensorOr Clone(const Operand& a);

// Losses; reduction: "mean", "sum" or "none".
TensorOr MseLoss(const Operand& input, const Operand& target,
                 const std::string& reduction = "mean");
// Class-index (integer) or probability (float) targets.
TensorOr CrossEntropy(const Operand& logits, const Operand& target,
                      const std::string& reduction = "mean");

// In place: writes `value` into `target` (an autodiff target only under no_grad, see
// NoGradGuard); returns the op's outputs.
absl::StatusOr<std::vector<Tensor>> Assign(const Operand& target, const Operand& value);

TensorOr operator+(const TensorOr& a, const TensorOr& b);
TensorOr operator+(const TensorOr& a, double b);
TensorOr operator+(double a, const TensorOr& b);
TensorOr operator-(const TensorOr& a, const TensorOr& b);
TensorOr operator-(const TensorOr& a, double b);
TensorOr operator-(double a, const TensorOr& b);
TensorOr operator*(const TensorOr& a, const TensorOr& b);
TensorOr operator*(const TensorOr& a, double b);
TensorOr operator*(double a, const TensorOr& b);
TensorOr operator/(const TensorOr& a, const TensorOr& b);
TensorOr operator/(const TensorOr& a, double b);
TensorOr operator/(double a, const TensorOr& b);
TensorOr operator-(const TensorOr& a);

}  // namespace tensord::client
