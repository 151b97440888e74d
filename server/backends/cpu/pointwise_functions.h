// The scalar function of each pointwise op that a loop kernel and the fused elementwise kernel
// (fused_elementwise_kernels.cc) both apply. One definition each, so that a fused chain computes
// exactly the bits its calls computed one by one. A functor with a parameter (an add's alpha, a
// clamp's bounds) takes it converted once to T, as the loop kernels do before their loop.
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "server/backends/cpu/elementwise_dispatch.h"
#include "server/backends/cpu/vector_math.h"

namespace tensord::cpu::pointwise {

inline constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/sqrt(2)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2*pi)
inline constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
inline constexpr double kGeluKappa = 0.044715;

// Unary.
struct Neg {
  template <typename T>
  T operator()(T x) const {
    return WrapNeg(x);
  }
};
struct Abs {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::abs(x);
    } else {
      return x < 0 ? WrapNeg(x) : x;
    }
  }
};
struct Square {
  template <typename T>
  T operator()(T x) const {
    return WrapMul(x, x);
  }
};
struct Exp {
  template <typename T>
  T operator()(T x) const {
    return std::exp(x);
  }
};
struct Log {
  template <typename T>
  T operator()(T x) const {
    return std::log(x);
  }
};
struct Sqrt {
  template <typename T>
  T operator()(T x) const {
    return std::sqrt(x);
  }
};
struct Rsqrt {
  template <typename T>
  T operator()(T x) const {
    return T(1) / std::sqrt(x);
  }
};
struct Reciprocal {
  template <typename T>
  T operator()(T x) const {
    return T(1) / x;
  }
};
// NaN stays NaN (x < 0 is false for it), as with torch.relu.
struct Relu {
  template <typename T>
  T operator()(T x) const {
    return x < T(0) ? T(0) : x;
  }
};
struct Sigmoid {
  template <typename T>
  T operator()(T x) const {
    return T(1) / (T(1) + std::exp(-x));
  }
};
// tanh: f32 from libmvec (vector_math.h), the other dtypes from libm.
template <typename T>
T TanhOf(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return vmath::Tanh(x);
  } else {
    return std::tanh(x);
  }
}
struct Tanh {
  template <typename T>
  T operator()(T x) const {
    return TanhOf(x);
  }
  // A contiguous f32 run at once (UnaryLoop and the fused kernel take it).
  static void Run(const float* x, float* y, int64_t n) { vmath::Tanh(x, y, n); }
};
struct Silu {
  template <typename T>
  T operator()(T x) const {
    return x / (T(1) + std::exp(-x));
  }
};
struct Gelu {
  template <typename T>
  T operator()(T x) const {
    return T(0.5) * x * (T(1) + std::erf(x * T(kSqrt1_2)));
  }
};
struct GeluTanh {
  template <typename T>
  T operator()(T x) const {
    const T inner = T(kSqrt2OverPi) * (x + T(kGeluKappa) * x * x * x);
    return T(0.5) * x * (T(1) + TanhOf(inner));
  }
};
template <typename T>
struct LeakyRelu {
  T slope;
  T operator()(T x) const { return x > T(0) ? x : x * slope; }
};
template <typename T>
struct Elu {
  T alpha;
  T operator()(T x) const { return x > T(0) ? x : alpha * std::expm1(x); }
};
// min(max(x, lo), hi): NaN stays NaN and lo > hi gives hi, as in PyTorch.
template <typename T>
struct Clamp {
  T lo, hi;
  T operator()(T x) const { return std::min(std::max(x, lo), hi); }
};

// Binary.
struct Add {
  template <typename T>
  T operator()(T x, T y) const {
    return WrapAdd(x, y);
  }
};
struct Sub {
  template <typename T>
  T operator()(T x, T y) const {
    return WrapSub(x, y);
  }
};
// x + alpha * y, for an alpha other than 1 and -1.
template <typename T>
struct AddScaled {
  T alpha;
  T operator()(T x, T y) const { return WrapAdd(x, WrapMul(alpha, y)); }
};
struct Mul {
  template <typename T>
  T operator()(T x, T y) const {
    return WrapMul(x, y);
  }
};
struct Div {
  template <typename T>
  T operator()(T x, T y) const {
    return x / y;
  }
};
struct Maximum {
  template <typename T>
  T operator()(T x, T y) const {
    return MaxNaN(x, y);
  }
};
struct Minimum {
  template <typename T>
  T operator()(T x, T y) const {
    return MinNaN(x, y);
  }
};

}  // namespace tensord::cpu::pointwise
