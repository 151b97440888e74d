// Gradients of broadcast operands: a rule answers in its output's shape, and the gradient an
// operand receives is that answer summed over the dimensions broadcasting added or stretched.
#pragma once

#include "absl/status/statusor.h"
#include "server/core/tensor.h"
#include "server/ops/op_def.h"

namespace tensord {

// Sums `grad` down to `target`'s shape (undoing broadcasting) and casts it to its dtype.
absl::StatusOr<Tensor> ReduceGradTo(const Tensor& grad, const TensorMeta& target, OpRunner& runner);

}  // namespace tensord
