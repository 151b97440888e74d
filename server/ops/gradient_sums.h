// The sums around backward rules, shared by the autodiff engine and by rules that run other
// ops' rules (the fused elementwise call): a rule answers in its output's shape, and the
// gradient an operand receives is that answer summed over the dimensions broadcasting added or
// stretched; an operand read more than once receives the sum of its contributions; one that no
// rule reached receives zeros, the empty sum.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/tensor.h"
#include "server/ops/op_def.h"

namespace tensord {

// Sums `grad` down to `target`'s shape (undoing broadcasting) and casts it to its dtype.
absl::StatusOr<Tensor> ReduceGradTo(const Tensor& grad, const TensorMeta& target, OpRunner& runner);

// Adds `grad` to `slot`; an empty slot takes `grad` itself.
absl::Status AccumulateGrad(Tensor& slot, Tensor grad, OpRunner& runner);

// The attributes of a creation op (zeros, ones) making a tensor of `meta`'s shape and dtype on
// its device.
AttrMap CreationAttrs(const TensorMeta& meta);

// Zeros shaped as `meta`: the gradient of a value no rule reached.
absl::StatusOr<Tensor> ZeroGrad(const TensorMeta& meta, OpRunner& runner);

}  // namespace tensord
