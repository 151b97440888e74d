// Shared by reduction-like ops (reductions, losses, norms).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/shape.h"
#include "server/core/tensor.h"
#include "server/ops/attrs.h"
#include "server/ops/op_def.h"
#include "server/ops/registry.h"

namespace tensord {
// Dims to reduce from the "dim" attribute (absent or empty = all), normalised and sorted.
absl::StatusOr<std::vector<int64_t>> ReductionDims(const std::string& op, const Attrs& attrs,
                                                   int64_t rank);
Shape ReducedShape(const Shape& in, const std::vector<int64_t>& dims, bool keepdim);
// Number of input elements folded into each output element (0 for an empty reduced dim).
int64_t ReducedCount(const Shape& in, const std::vector<int64_t>& dims);
// `dim` wrapped into [0, rank) for `op`, or BAD_ATTRIBUTE naming the op, the value and the rank.
absl::StatusOr<int64_t> NormalizeDimFor(const std::string& op, int64_t dim, int64_t rank,
                                        const char* attr = "dim");
// SHAPE_MISMATCH when one of `dims` has size zero: ops without an identity (max, argmax, ...)
// cannot reduce over it, as in PyTorch.
absl::Status CheckNonEmptyReduction(const std::string& op, const Shape& in,
                                    const std::vector<int64_t>& dims);
// Dims reduced by an op whose optional "dim" is a single int (max, prod, ...): that dim, or
// every dim when absent; empty for a 0-d input.
absl::StatusOr<std::vector<int64_t>> SingleDimOrAll(const std::string& op, const Attrs& attrs,
                                                    int64_t rank);

// var/std's divisor correction: `correction` (default 1) or the older `unbiased` flag, never
// both (BAD_ATTRIBUTE); neither given is 1, as in torch.var.
absl::StatusOr<double> VarCorrection(const std::string& op, const Attrs& attrs);

// Losses: the "reduction" attribute (none | mean | sum, default mean) and its application to
// an unreduced loss through the mean and sum ops (so that autodiff sees them).
AttrSpec LossReductionAttr();
absl::StatusOr<Tensor> ApplyLossReduction(OpRunner& run, const Tensor& loss, const Attrs& attrs);
// A public loss entry: inputs promoted to the input's float dtype, the reduction attribute.
OpDef LossOp(const std::string& name, int min_inputs, int max_inputs,
             std::vector<std::string> input_names);
// An internal elementwise loss over operands of one shape and dtype, differentiated by the
// internal op `<name>_backward`(grad, inputs...) (one gradient per input); both take `attrs`.
OpDef ElementwiseLoss(const std::string& name, int min_inputs, int max_inputs,
                      std::vector<std::string> input_names, std::vector<AttrSpec> attrs = {});
OpDef ElementwiseLossBackward(const std::string& forward, int min_inputs, int max_inputs,
                              std::vector<AttrSpec> attrs = {});
// `t` expanded to `shape` (a no-op when it has it already).
absl::StatusOr<Tensor> ExpandToShape(OpRunner& run, const Tensor& t, const Shape& shape);

// cross_entropy / nll_loss (`loss` names the public op): OK for a class index in
// [0, classes) or equal to ignore_index, else INDEX_OUT_OF_RANGE naming the value. Every
// backend checks its targets with it, so the error is the same on every device.
absl::Status CheckClassIndex(const std::string& loss, int64_t target, int64_t classes,
                             int64_t ignore_index);

// binary_cross_entropy's input (in host memory): INVALID_REQUEST naming the first element that
// is no probability in [0, 1] (NaN included). Every backend checks with it.
absl::Status CheckProbabilities(const Tensor& input);

// Family parts registered from RegisterReductionOps / RegisterLossOps.
void RegisterMinMaxOps(OpRegistry& r);
void RegisterStatisticOps(OpRegistry& r);
void RegisterCrossEntropyOps(OpRegistry& r);
void RegisterProductScanOps(OpRegistry& r);   // prod, cumsum, cumprod
void RegisterNormOps(OpRegistry& r);          // norm
void RegisterLossDistanceOps(OpRegistry& r);  // smooth_l1, huber, kl_div, cosine_similarity
}  // namespace tensord
