// Reference helpers for the shape and indexing op tests: multi-index walks over contiguous
// tensors, so expected values are computed from the definition of each op.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {

inline const std::vector<DType> kEveryDType = {DType::kF32, DType::kF64, DType::kI32, DType::kI64,
                                               DType::kBool};

// Calls f(index) for every multi-index of `shape` in row-major order.
inline void ForEachIndex(const Shape& shape, const std::function<void(const Shape&)>& f) {
  if (NumElements(shape) == 0) return;
  Shape index(shape.size(), 0);
  for (int64_t n = NumElements(shape); n > 0; --n) {
    f(index);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

inline int64_t FlatIndex(const Shape& shape, const Shape& index) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

inline double At(const Tensor& t, const Shape& index) {
  return t.ElementAsDouble(FlatIndex(t.shape(), index));
}

// The expected values of an output of shape `out`: f maps an output index to a value.
inline std::vector<double> Expected(const Shape& out,
                                    const std::function<double(const Shape&)>& f) {
  std::vector<double> values;
  ForEachIndex(out, [&](const Shape& index) { values.push_back(f(index)); });
  return values;
}

// Distinct-ish values of any dtype: floats and ints in [-50, 50), bool 0/1.
inline Tensor Sample(DType dtype, Shape shape, uint32_t seed) {
  return Random(dtype, std::move(shape), seed, -50, 50);
}

inline Reason ReasonOf(const absl::StatusOr<std::vector<Tensor>>& result) {
  return result.ok() ? Reason::kUnspecified : GetReason(result.status());
}

// Exact equality of values and shape (copies must not change a bit of the value).
inline ::testing::AssertionResult SameValues(const Tensor& actual, const Shape& shape,
                                             const std::vector<double>& expected) {
  if (!actual.defined()) return ::testing::AssertionFailure() << "undefined tensor";
  if (actual.shape() != shape) {
    return ::testing::AssertionFailure()
           << "shape " << ShapeToString(actual.shape()) << ", expected " << ShapeToString(shape);
  }
  return AllClose(actual, expected, 0, 0);
}

}  // namespace tensord::testing
