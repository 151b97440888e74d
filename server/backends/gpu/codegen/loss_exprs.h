// The losses a GPU backend generates: the class-index losses (cross_entropy_nll and its
// gradient) as plans of the group template, where a group is one sample's classes, and the
// pointwise parts of the other losses as elementwise expressions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/backends/gpu/codegen/elementwise_exprs.h"
#include "server/backends/gpu/codegen/reduction_exprs.h"

namespace tensord::gpu {

// cross_entropy_nll over log-probabilities [C] or [N, C, d...] (inputs: log_probs, target,
// [weight]): each group is a sample's classes, its loss written per sample (f64 for a reduced
// loss, summed by ScaledSumPlan afterwards). Targets are checked on the host before.
GroupPlan NllLossPlan(const Attrs& attrs, int64_t rank, bool weighted);
// cross_entropy_nll_backward (inputs: grad, log_probs, target, [weight]): the gradient of every
// log-probability. A reduced loss's gradient scale (grad / total weight for mean) is s0.
GroupPlan NllBackwardPlan(const Attrs& attrs, int64_t rank, bool weighted);
// The sum of every element of input 0 divided by s0.
GroupPlan ScaledSumPlan(int64_t rank, double divisor);

// A pointwise loss op (l1_loss_elementwise, binary_cross_entropy_elementwise and
// _with_logits, smooth_l1_loss, huber_loss, kl_div, each with its _backward): one expression
// per output, in double (the kernel computes in f64, as the CPU loops), the formulas and
// branch choices of the CPU kernels. `inputs` counts the call's operands (an optional
// pos_weight).
struct PointwiseLossForm {
  const char* op;
  std::vector<ElementwiseExpr> (*exprs)(const Attrs& attrs, int inputs);
  // Its probabilities are checked on the host before anything is written (binary cross
  // entropy), as on the CPU.
  bool checks_probabilities = false;
};
absl::Span<const PointwiseLossForm> PointwiseLosses();

}  // namespace tensord::gpu
