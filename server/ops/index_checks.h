// The checks of index tensors every backend runs before it reads or writes anything, so that
// a bad index is the same INDEX_OUT_OF_RANGE (or a value that does not fit, DTYPE_MISMATCH)
// on every device. A GPU backend reads the indices to the host for them.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/core/tensor.h"

namespace tensord::ops {

// The values of a host index tensor (i32 or i64), in order.
std::vector<int64_t> IndexValues(const Tensor& index);

// The first of `values` outside [0, size), reported with its position and the dim it indexes
// (index_select, gather, the scatters, index_add, one_hot).
absl::Status CheckIndexRange(const std::string& op, const std::vector<int64_t>& values, int64_t dim,
                             int64_t size);

// The first embedding index outside [0, count).
absl::Status CheckEmbeddingIndices(const std::string& op, const std::vector<int64_t>& values,
                                   int64_t count);

// one_hot's class count (num_classes, or max + 1 for -1) once every value is checked.
absl::StatusOr<int64_t> OneHotClasses(const std::vector<int64_t>& values, int64_t num_classes,
                                      int64_t rank);

// scatter's number src (an f64, i64 or bool wrapped scalar) as the input's T, refused where T
// cannot hold it, as PyTorch's checked conversion of a Scalar refuses (`value cannot be
// converted to type float without overflow`); a float written into an integer input is
// truncated toward zero, as PyTorch does.
template <typename T>
absl::StatusOr<T> ScatterValueAs(const std::string& op, const Tensor& value, DType dtype) {
  bool fits = true;
  T out{};
  if (value.dtype() == DType::kBool) {
    out = static_cast<T>(value.data<bool>()[0]);
  } else if (value.dtype() == DType::kI64) {
    const int64_t v = value.data<int64_t>()[0];
    if constexpr (std::is_integral_v<T>) {
      fits = v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
    }
    if (fits) out = static_cast<T>(v);
  } else {
    const double v = value.ElementAsDouble(0);
    if constexpr (std::is_integral_v<T>) {
      // [-2^d, 2^d) with d the value bits; NaN fails every comparison.
      const double limit = std::ldexp(1.0, std::numeric_limits<T>::digits);
      fits = v >= -limit && v < limit;
    } else {
      fits = !std::isfinite(v) || std::fabs(v) <= std::numeric_limits<T>::max();
    }
    if (fits) out = static_cast<T>(v);
  }
  if (!fits) {
    return Error(Reason::kDtypeMismatch,
                 absl::StrCat(op, ": value ", value.ElementAsDouble(0), " cannot be converted to ",
                              DTypeName(dtype), " without overflow"),
                 {{"op", op}, {"dtype", std::string(DTypeName(dtype))}});
  }
  return out;
}

// The same value as a 0-d host tensor of `dtype` (for a backend that uploads it).
absl::StatusOr<Tensor> ScatterValueTensor(const std::string& op, const Tensor& value, DType dtype);

}  // namespace tensord::ops
