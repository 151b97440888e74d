// Loop kernels for unary math: each op is a small functor applied by UnaryLoop, so the inner
// loop is a flat, inlinable loop per dtype.
#include <algorithm>
#include <cmath>
#include <limits>

#include "server/backends/cpu/elementwise_dispatch.h"
#include "server/backends/cpu/elementwise_kernels.h"
#include "server/backends/cpu/loops.h"
#include "server/backends/cpu/pointwise_functions.h"

namespace tensord::cpu {
namespace {

// PyTorch's sign: NaN and -0.0 give 0; bool is the identity.
struct SignOp {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return x;
    } else {
      return static_cast<T>((T(0) < x) - (x < T(0)));
    }
  }
};
// floor, ceil and trunc; the identity on integers, which are whole already.
enum class Rounding { kFloor, kCeil, kTrunc };
template <Rounding kMode>
struct RoundingOp {
  template <typename T>
  T operator()(T x) const {
    if constexpr (!std::is_floating_point_v<T>) {
      return x;
    } else if constexpr (kMode == Rounding::kFloor) {
      return std::floor(x);
    } else if constexpr (kMode == Rounding::kCeil) {
      return std::ceil(x);
    } else {
      return std::trunc(x);
    }
  }
};
struct FracOp {
  template <typename T>
  T operator()(T x) const {
    return x - std::trunc(x);
  }
};

struct LogicalNotOp {
  template <typename T>
  bool operator()(T x) const {
    return x == T(0);
  }
};
struct IsNanOp {
  template <typename T>
  bool operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return x != x;
    return false;
  }
};
struct IsInfOp {
  template <typename T>
  bool operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::abs(x) == std::numeric_limits<T>::infinity();
    }
    return false;
  }
};
struct IsFiniteOp {
  template <typename T>
  bool operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::abs(x) < std::numeric_limits<T>::infinity();
    }
    return true;
  }
};

template <typename Op>
absl::Status PredicateKernel(KernelCall& c) {
  VisitDType<kFIB>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    UnaryLoop<T, bool>(c.inputs[0], c.outputs[0], Op{});
  });
  return absl::OkStatus();
}

// torch.round(input, decimals): half to even (nearbyint under the default rounding mode),
// scaled by 10^decimals; integers are returned unchanged (decimals must be 0 for them).
absl::Status RoundKernel(KernelCall& c) {
  const int64_t decimals = c.attrs.GetInt("decimals");
  VisitDType<kFI>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if (decimals == 0) {
        UnaryLoop<T, T>(c.inputs[0], c.outputs[0], [](T x) { return std::nearbyint(x); });
        return;
      }
      const T scale = static_cast<T>(std::pow(10.0, static_cast<double>(std::abs(decimals))));
      if (decimals > 0) {
        UnaryLoop<T, T>(c.inputs[0], c.outputs[0],
                        [scale](T x) { return std::nearbyint(x * scale) / scale; });
      } else {
        UnaryLoop<T, T>(c.inputs[0], c.outputs[0],
                        [scale](T x) { return std::nearbyint(x / scale) * scale; });
      }
    } else {
      UnaryLoop<T, T>(c.inputs[0], c.outputs[0], [](T x) { return x; });
    }
  });
  return absl::OkStatus();
}

// min(max(x, lo), hi): NaN inputs stay NaN and lo > hi gives hi, as in PyTorch. An integer
// input clamped to a fractional bound has an f32 output (chosen by the shape rule).
absl::Status ClampKernel(KernelCall& c) {
  const double inf = std::numeric_limits<double>::infinity();
  // An absent bound (PyTorch's None) does not clamp.
  const double lo = c.attrs.Has("min") ? c.attrs.GetFloat("min") : -inf;
  const double hi = c.attrs.Has("max") ? c.attrs.GetFloat("max") : inf;
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  VisitDType<kFI>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (out.dtype() == x.dtype()) {
      const T l = SaturateCast<T>(lo), h = SaturateCast<T>(hi);
      UnaryLoop<T, T>(x, out, pointwise::Clamp<T>{l, h});
    } else {
      const float l = static_cast<float>(lo), h = static_cast<float>(hi);
      UnaryLoop<T, float>(x, out,
                          [l, h](T v) { return std::min(std::max(static_cast<float>(v), l), h); });
    }
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterUnaryMathKernels(KernelTable& t) {
  t.Add("neg", "loop_neg", kFloatInt, SameDTypeKernel<kFI, pointwise::Neg>);
  t.Add("abs", "loop_abs", kFloatInt, SameDTypeKernel<kFI, pointwise::Abs>);
  t.Add("square", "loop_square", kFloatInt, SameDTypeKernel<kFI, pointwise::Square>);
  t.Add("exp", "loop_exp", kAll, FloatFunctionKernel<pointwise::Exp>);
  t.Add("log", "loop_log", kAll, FloatFunctionKernel<pointwise::Log>);
  t.Add("sqrt", "loop_sqrt", kAll, FloatFunctionKernel<pointwise::Sqrt>);
  t.Add("rsqrt", "loop_rsqrt", kAll, FloatFunctionKernel<pointwise::Rsqrt>);
  t.Add("reciprocal", "loop_reciprocal", kAll, FloatFunctionKernel<pointwise::Reciprocal>);
  t.Add("sign", "loop_sign", kAll, SameDTypeKernel<kFIB, SignOp>);
  t.Add("floor", "loop_floor", kFloatInt, SameDTypeKernel<kFI, RoundingOp<Rounding::kFloor>>);
  t.Add("ceil", "loop_ceil", kFloatInt, SameDTypeKernel<kFI, RoundingOp<Rounding::kCeil>>);
  t.Add("trunc", "loop_trunc", kFloatInt, SameDTypeKernel<kFI, RoundingOp<Rounding::kTrunc>>);
  t.Add("round", "loop_round", kFloatInt, RoundKernel);
  t.Add("frac", "loop_frac", kFloat, SameDTypeKernel<kF, FracOp>);
  t.Add("clamp", "loop_clamp", kFloatInt, ClampKernel);
  t.Add("logical_not", "loop_logical_not", kAll, PredicateKernel<LogicalNotOp>);
  t.Add("isnan", "loop_isnan", kAll, PredicateKernel<IsNanOp>);
  t.Add("isinf", "loop_isinf", kAll, PredicateKernel<IsInfOp>);
  t.Add("isfinite", "loop_isfinite", kAll, PredicateKernel<IsFiniteOp>);
}

}  // namespace tensord::cpu
