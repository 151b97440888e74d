// The class-index losses a GPU backend generates (cross_entropy_nll and its gradient) as plans
// of the group template: a group is one sample's classes.
#pragma once

#include "server/backends/gpu/reduction_exprs.h"

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

}  // namespace tensord::gpu
