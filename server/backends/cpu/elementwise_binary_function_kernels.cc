// Loop kernels for the binary functions (remainder, fmod, atan2, hypot, bitwise ops) and
// lerp. Binary inputs arrive promoted to one dtype.
#include <cmath>
#include <type_traits>

#include "server/backends/cpu/elementwise_kernels.h"
#include "server/ops/elementwise.h"

namespace tensord::cpu {
namespace {

// Python-style modulo: the result takes the divisor's sign (PyTorch's remainder kernel).
template <typename T>
T Remainder(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T mod = std::fmod(a, b);
    if (mod != 0 && ((b < 0) != (mod < 0))) mod += b;
    return mod;
  } else {
    // x % -1 is 0, but lowest() % -1 traps on x86: answer it without dividing.
    if (b == -1) return 0;
    T mod = static_cast<T>(a % b);
    if (mod != 0 && ((b < 0) != (mod < 0))) mod = WrapAdd(mod, b);
    return mod;
  }
}

// C-style modulo: the result takes the dividend's sign.
template <typename T>
T Fmod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else {
    return b == -1 ? T(0) : static_cast<T>(a % b);
  }
}

// Float modulo by zero is NaN; integer modulo by zero is refused, like PyTorch's
// ZeroDivisionError and like integer div here.
template <bool kPython>
absl::Status ModuloKernel(KernelCall& c) {
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  const std::string& op = c.op.name;
  absl::Status status;
  VisitDType<kFI>(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsSignedInt<T>) {
      if (AnyZero<T>(b)) {
        status = ops::IntegerDivisionByZero(op, "");
        return;
      }
    }
    BinaryLoop<T, T, T>(a, b, c.outputs[0], kPython ? Remainder<T> : Fmod<T>);
  });
  return status;
}

// atan2 of integer or bool operands is computed in f32.
absl::Status Atan2Kernel(KernelCall& c) {
  VisitDType<kFIB>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      BinaryLoop<T, T, T>(c.inputs[0], c.inputs[1], c.outputs[0],
                          [](T y, T x) { return std::atan2(y, x); });
    } else {
      BinaryLoop<T, T, float>(c.inputs[0], c.inputs[1], c.outputs[0], [](T y, T x) {
        return std::atan2(static_cast<float>(y), static_cast<float>(x));
      });
    }
  });
  return absl::OkStatus();
}

absl::Status HypotKernel(KernelCall& c) {
  VisitDType<kF>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    BinaryLoop<T, T, T>(c.inputs[0], c.inputs[1], c.outputs[0],
                        [](T a, T b) { return std::hypot(a, b); });
  });
  return absl::OkStatus();
}

// On bools the bitwise ops are the logical ones; the casts keep bool results 0 or 1.
struct BitAnd {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a & b);
  }
};
struct BitOr {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a | b);
  }
};
struct BitXor {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a ^ b);
  }
};
struct BitNot {
  template <typename T>
  T operator()(T a) const {
    if constexpr (std::is_same_v<T, bool>) {
      return !a;
    } else {
      return static_cast<T>(~a);
    }
  }
};

// PyTorch's lerp: the formula switches at |weight| = 0.5 so that weight 1 gives `end` exactly.
template <typename T>
T Lerp(T a, T b, T w) {
  return std::abs(w) < T(0.5) ? a + w * (b - a) : b - (b - a) * (T(1) - w);
}

// A 0-d weight may have any dtype (a Python number); it is converted once.
absl::Status LerpKernel(KernelCall& c) {
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  const Tensor& w = c.inputs[2];
  VisitDType<kF>(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (w.dtype() == a.dtype()) {
      TernaryLoop<T, T, T, T>(a, b, w, c.outputs[0], Lerp<T>);
    } else {
      const T weight = static_cast<T>(w.ElementAsDouble(0));
      BinaryLoop<T, T, T>(a, b, c.outputs[0], [weight](T x, T y) { return Lerp(x, y, weight); });
    }
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterBinaryFunctionKernels(KernelTable& t) {
  t.Add("remainder", "loop_remainder", kFloatInt, ModuloKernel<true>);
  t.Add("fmod", "loop_fmod", kFloatInt, ModuloKernel<false>);
  t.Add("atan2", "loop_atan2", kAll, Atan2Kernel);
  t.Add("hypot", "loop_hypot", kFloat, HypotKernel);
  t.Add("bitwise_and", "loop_bitwise_and", kIntBool,
        SameDTypeBinaryKernel<kIntBool.bits(), BitAnd>);
  t.Add("bitwise_or", "loop_bitwise_or", kIntBool, SameDTypeBinaryKernel<kIntBool.bits(), BitOr>);
  t.Add("bitwise_xor", "loop_bitwise_xor", kIntBool,
        SameDTypeBinaryKernel<kIntBool.bits(), BitXor>);
  t.Add("bitwise_not", "loop_bitwise_not", kIntBool, SameDTypeKernel<kIntBool.bits(), BitNot>);
  t.Add("lerp", "loop_lerp", kFloat, LerpKernel);
}

}  // namespace tensord::cpu
