// Dtype dispatch and integer-safe arithmetic for the elementwise loop kernels. Dispatch
// instantiates a kernel body only for the dtypes its op supports, so a functor need not
// compile for the others; the arithmetic helpers give integers PyTorch's wrap-around results
// without signed-overflow undefined behaviour, and stay simple enough to vectorize.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "server/core/dtype.h"

namespace tensord::cpu {

inline constexpr uint32_t kF = kFloat.bits();
inline constexpr uint32_t kFI = kFloatInt.bits();
inline constexpr uint32_t kFIB = kAll.bits();

// Calls fn(T{}) with T the C++ type of `dtype` when `dtype` is in kSet; otherwise does nothing
// (the dispatcher has checked the dtype against the op table before any kernel runs).
template <uint32_t kSet, typename Fn>
void VisitDType(DType dtype, Fn&& fn) {
  constexpr DTypeSet set(kSet);
  switch (dtype) {
    case DType::kF32:
      if constexpr (set.Contains(DType::kF32)) fn(float{});
      break;
    case DType::kF64:
      if constexpr (set.Contains(DType::kF64)) fn(double{});
      break;
    case DType::kI32:
      if constexpr (set.Contains(DType::kI32)) fn(int32_t{});
      break;
    case DType::kI64:
      if constexpr (set.Contains(DType::kI64)) fn(int64_t{});
      break;
    case DType::kBool:
      if constexpr (set.Contains(DType::kBool)) fn(bool{});
      break;
  }
}

template <typename T>
inline constexpr bool kIsSignedInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Two's-complement arithmetic through the unsigned type: wraps like PyTorch, never UB.
template <typename T>
inline T WrapAdd(T a, T b) {
  if constexpr (kIsSignedInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
inline T WrapSub(T a, T b) {
  if constexpr (kIsSignedInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <typename T>
inline T WrapMul(T a, T b) {
  if constexpr (kIsSignedInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}
template <typename T>
inline T WrapNeg(T a) {
  if constexpr (kIsSignedInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(U{0} - static_cast<U>(a));
  } else {
    return -a;
  }
}

// Converts a double bound to T, saturating at T's range (for integer clamp bounds).
template <typename T>
inline T SaturateCast(double v) {
  if constexpr (kIsSignedInt<T>) {
    if (!(v > static_cast<double>(std::numeric_limits<T>::lowest()))) {
      return std::numeric_limits<T>::lowest();
    }
    if (!(v < static_cast<double>(std::numeric_limits<T>::max()))) {
      return std::numeric_limits<T>::max();
    }
  }
  return static_cast<T>(v);
}

// NaN-propagating max/min (torch.maximum/minimum); plain max/min for integers and bools.
template <typename T>
inline T MaxNaN(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return (a > b || a != a) ? a : b;
  } else {
    return a > b ? a : b;
  }
}
template <typename T>
inline T MinNaN(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return (a < b || a != a) ? a : b;
  } else {
    return a < b ? a : b;
  }
}

}  // namespace tensord::cpu
