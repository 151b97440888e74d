// Shared by reduction-like ops (reductions, losses, norms).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/shape.h"
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

// Losses: the "reduction" attribute (none | mean | sum, default mean) and its application to
// an unreduced loss through the mean and sum ops (so that autodiff sees them).
AttrSpec LossReductionAttr();
absl::StatusOr<Tensor> ApplyLossReduction(OpRunner& run, const Tensor& loss, const Attrs& attrs);

// Family parts registered from RegisterReductionOps / RegisterLossOps.
void RegisterMinMaxOps(OpRegistry& r);
void RegisterStatisticOps(OpRegistry& r);
void RegisterCrossEntropyOps(OpRegistry& r);
}  // namespace tensord
