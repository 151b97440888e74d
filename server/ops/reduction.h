// Shared by reduction-like ops (reductions, losses, norms).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/shape.h"
#include "server/ops/attrs.h"

namespace tensord {
// Dims to reduce from the "dim" attribute (absent or empty = all), normalised and sorted.
absl::StatusOr<std::vector<int64_t>> ReductionDims(const std::string& op, const Attrs& attrs,
                                                   int64_t rank);
Shape ReducedShape(const Shape& in, const std::vector<int64_t>& dims, bool keepdim);
}  // namespace tensord
