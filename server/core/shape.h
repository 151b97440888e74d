// Shapes, strides and NumPy/PyTorch broadcasting.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tensord {

using Shape = std::vector<int64_t>;

// Product of the dimensions; 1 for a 0-d shape. The caller must have validated the shape.
int64_t NumElements(absl::Span<const int64_t> shape);
// Validates dims (non-negative, within limits) and returns the element count, refusing overflow.
absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> shape);
// Row-major strides in elements.
std::vector<int64_t> ContiguousStrides(absl::Span<const int64_t> shape);
// "[2, 3]".
std::string ShapeToString(absl::Span<const int64_t> shape);

// Broadcast of two or more shapes, or SHAPE_MISMATCH naming both shapes.
absl::StatusOr<Shape> BroadcastShapes(absl::Span<const int64_t> a, absl::Span<const int64_t> b);
absl::StatusOr<Shape> BroadcastAll(const std::vector<Shape>& shapes);

// Wraps a possibly negative dim into [0, rank); BAD_ATTRIBUTE when out of range.
// A 0-d tensor accepts dims -1 and 0 like PyTorch.
absl::StatusOr<int64_t> NormalizeDim(int64_t dim, int64_t rank, const char* attr = "dim");

// Strides (in elements) for reading `shape` broadcast to `out_shape`: 0 on broadcast dims.
std::vector<int64_t> BroadcastStrides(absl::Span<const int64_t> shape,
                                      absl::Span<const int64_t> out_shape);

}  // namespace tensord
