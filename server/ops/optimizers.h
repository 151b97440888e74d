// What every backend's kernels of the optimizer ops (optimizers.cc) share: the refusal of
// aliased inputs, and the scalars of one Adam step, computed in double on the host as
// torch.optim computes them in Python before its tensor ops.
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/core/tensor.h"
#include "server/ops/attrs.h"
#include "server/ops/op_def.h"

namespace tensord::ops {

// A step writes in place in one pass, so no two inputs may share storage (an exp_avg passed
// as exp_avg_sq would read values the same pass already wrote, where PyTorch's sequence of
// separate ops would not). BAD_OPERAND naming both inputs.
absl::Status CheckOptimizerAliasing(const OpDef& op, absl::Span<const Tensor> inputs);

struct AdamScalars {
  double beta1, beta2, lr, eps, weight_decay;
  double step_size;              // lr / (1 - beta1^step)
  double bias_correction2_sqrt;  // sqrt(1 - beta2^step)
};
// `step` is the count after this step's increment (1 at the first step).
AdamScalars AdamStepScalars(const Attrs& attrs, double step);

}  // namespace tensord::ops
