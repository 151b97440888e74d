// layer_norm and its gradient as plans of the group template (reduction_source.h), in double
// as the CPU loops compute them. A row is the normalized trailing dims; the parameters'
// gradients sum over rows, so they walk the leading dims with the rows' statistics as tables.
// Every plan here (batch_norm's too) is cooperative: on a GPU a long row, channel or column
// runs on a work group (GroupPlan::cooperative).
#pragma once

#include <cstdint>

#include "server/backends/gpu/codegen/reduction_exprs.h"

namespace tensord::gpu {

// The row dims of a layer_norm over the last `normalized` of `rank` dims, and the batch dims.
std::vector<int64_t> RowDims(int64_t rank, int64_t normalized);
std::vector<int64_t> BatchDims(int64_t rank, int64_t normalized);

// layer_norm (inputs: x, [weight, [bias]]): each row normalized, scaled and shifted.
GroupPlan LayerNormPlan(int64_t rank, int64_t normalized, int inputs, double eps, DType dtype);
// The gradient of x (inputs: grad, x, [weight]).
GroupPlan LayerNormInputGradPlan(int64_t rank, int64_t normalized, bool weighted, double eps,
                                 DType dtype);
// A row's mean (rstd false; inputs: x) or 1 / sqrt(var + eps) (rstd true; inputs: x and the
// rows' means), f64.
GroupPlan RowStatPlan(int64_t rank, int64_t normalized, bool rstd, double eps);
// The weight's gradient, sum over rows of grad * xhat (inputs: x, grad, mean, rstd), or the
// bias's, the sum over rows of grad (inputs: grad).
GroupPlan LayerNormWeightGradPlan(int64_t rank, int64_t normalized, DType dtype);
GroupPlan LayerNormBiasGradPlan(int64_t rank, int64_t normalized, DType dtype);

// native_batch_norm over [N, C, *]: a group is a channel (every dim but 1).
std::vector<int64_t> ChannelDims(int64_t rank);
// The batch's mean per channel (var false; inputs: x), or its biased variance (inputs: x, the
// mean).
GroupPlan BatchNormStatPlan(int64_t rank, bool var, DType dtype);
// native_batch_norm_backward (inputs: grad, x, weight, mean, var): the weight's gradient per
// channel (part 1), the bias's (2), then the input's per element (part 0; inputs also the
// weight's and the bias's gradients, as parts 1 and 2 wrote them).
GroupPlan BatchNormGradPlan(int64_t rank, bool training, double eps, int part, DType dtype);

}  // namespace tensord::gpu
