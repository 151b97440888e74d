// Loop kernels for binary arithmetic and where. Inputs arrive promoted to one dtype; attributes
// are read once per call, never inside the element loop.
#include "server/backends/cpu/elementwise_kernels.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "server/backends/cpu/elementwise_dispatch.h"
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"
#include "server/backends/cpu/pointwise_functions.h"
#include "server/ops/elementwise.h"

namespace tensord::cpu {
namespace {

// out = a + alpha * b; `sign` is -1 for sub. The shape rule has checked that alpha is integral
// for integer inputs and 1 for bool inputs, where add is logical or (as in PyTorch).
absl::Status AddKernel(KernelCall& c, double sign) {
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  Tensor& out = c.outputs[0];
  const double alpha = sign * c.attrs.GetFloat("alpha");
  VisitDType<kFIB>(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      BinaryLoop<T, T, T>(a, b, out, [](bool x, bool y) { return x || y; });
    } else if (alpha == 1.0) {
      BinaryLoop<T, T, T>(a, b, out, pointwise::Add{});
    } else if (alpha == -1.0) {
      BinaryLoop<T, T, T>(a, b, out, pointwise::Sub{});
    } else {
      BinaryLoop<T, T, T>(a, b, out, pointwise::AddScaled<T>{SaturateCast<T>(alpha)});
    }
  });
  return absl::OkStatus();
}

absl::Status MulKernel(KernelCall& c) {
  VisitDType<kFIB>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      BinaryLoop<T, T, T>(c.inputs[0], c.inputs[1], c.outputs[0],
                          [](bool x, bool y) { return x && y; });
    } else {
      BinaryLoop<T, T, T>(c.inputs[0], c.inputs[1], c.outputs[0], pointwise::Mul{});
    }
  });
  return absl::OkStatus();
}

// Integer division without the two traps of x86 idiv: a zero divisor (checked beforehand) and
// lowest() / -1, which wraps to lowest() as in PyTorch.
template <typename T>
T TruncDivInt(T x, T y) {
  return y == -1 ? WrapNeg(x) : static_cast<T>(x / y);
}
template <typename T>
T FloorDivInt(T x, T y) {
  if (y == -1) return WrapNeg(x);
  T q = static_cast<T>(x / y);
  if (x % y != 0 && ((x < 0) != (y < 0))) --q;
  return q;
}
// PyTorch's div_floor_floating: floor of the exact quotient, computed through fmod so that
// a / b rounding up to an integer does not move the result.
template <typename T>
T FloorDivFloat(T x, T y) {
  if (y == 0) return x / y;
  const T mod = std::fmod(x, y);
  T div = (x - mod) / y;
  if (mod != 0 && ((y < 0) != (mod < 0))) div -= T(1);
  if (div == 0) return std::copysign(T(0), x / y);
  T floordiv = std::floor(div);
  if (div - floordiv > T(0.5)) floordiv += T(1);
  return floordiv;
}

absl::Status DivKernel(KernelCall& c) {
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  Tensor& out = c.outputs[0];
  const std::string mode = c.attrs.GetString("rounding_mode");
  absl::Status status;
  VisitDType<kFIB>(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if (mode.empty()) {
        BinaryLoop<T, T, T>(a, b, out, pointwise::Div{});
      } else if (mode == "trunc") {
        BinaryLoop<T, T, T>(a, b, out, [](T x, T y) { return std::trunc(x / y); });
      } else {
        BinaryLoop<T, T, T>(a, b, out, FloorDivFloat<T>);
      }
    } else if (mode.empty()) {
      // True division of integers and bools is computed in f32, PyTorch's default dtype.
      BinaryLoop<T, T, float>(
          a, b, out, [](T x, T y) { return static_cast<float>(x) / static_cast<float>(y); });
    } else if constexpr (kIsSignedInt<T>) {
      if (AnyZero<T>(b)) {
        status = ops::IntegerDivisionByZero("div", mode);
        return;
      }
      if (mode == "trunc") {
        BinaryLoop<T, T, T>(a, b, out, TruncDivInt<T>);
      } else {
        BinaryLoop<T, T, T>(a, b, out, FloorDivInt<T>);
      }
    }
  });
  return status;
}

// PyTorch's powi: negative exponents give 0 except for bases 1 and -1.
template <typename T>
T IntPow(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return exp % 2 != 0 ? -1 : 1;
    return 0;
  }
  T result = 1;
  while (exp != 0) {
    if (exp & 1) result = WrapMul(result, base);
    exp = static_cast<T>(exp >> 1);
    base = WrapMul(base, base);
  }
  return result;
}

// A scalar exponent common in models takes a cheaper exact path, as PyTorch's pow does.
template <typename T>
bool PowScalarFastPath(const Tensor& a, T e, Tensor& out) {
  auto run = [&](auto f) {
    UnaryLoop<T, T>(a, out, f);
    return true;
  };
  if (e == T(2)) return run([](T x) { return x * x; });
  if (e == T(3)) return run([](T x) { return x * x * x; });
  if (e == T(0.5)) return run([](T x) { return std::sqrt(x); });
  if (e == T(-0.5)) return run([](T x) { return T(1) / std::sqrt(x); });
  if (e == T(-1)) return run([](T x) { return T(1) / x; });
  if (e == T(-2)) return run([](T x) { return T(1) / (x * x); });
  return false;
}

absl::Status PowKernel(KernelCall& c) {
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  Tensor& out = c.outputs[0];
  VisitDType<kFI>(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if (b.numel() == 1 && a.shape() == out.shape() &&
          PowScalarFastPath<T>(a, b.data<T>()[0], out)) {
        return;
      }
      BinaryLoop<T, T, T>(a, b, out, [](T x, T y) { return std::pow(x, y); });
    } else {
      BinaryLoop<T, T, T>(a, b, out, IntPow<T>);
    }
  });
  return absl::OkStatus();
}

absl::Status MaximumKernel(KernelCall& c) {
  VisitDType<kFIB>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    BinaryLoop<T, T, T>(c.inputs[0], c.inputs[1], c.outputs[0], pointwise::Maximum{});
  });
  return absl::OkStatus();
}

absl::Status MinimumKernel(KernelCall& c) {
  VisitDType<kFIB>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    BinaryLoop<T, T, T>(c.inputs[0], c.inputs[1], c.outputs[0], pointwise::Minimum{});
  });
  return absl::OkStatus();
}

// where(cond, a, b): cond is bool; a and b are promoted to the output dtype.
absl::Status WhereKernel(KernelCall& c) {
  VisitDType<kFIB>(c.inputs[1].dtype(), [&](auto tag) {
    using T = decltype(tag);
    TernaryLoop<bool, T, T, T>(c.inputs[0], c.inputs[1], c.inputs[2], c.outputs[0],
                               [](bool k, T x, T y) { return k ? x : y; });
  });
  return absl::OkStatus();
}

// The kernel takes any value dtype; only the condition (input 0) must be bool. Capability
// queries name a single dtype (the value operand's), which is always supported.
bool WhereSupports(absl::Span<const DType> d, const Attrs*) {
  return d.size() < 3 || d[0] == DType::kBool;
}

}  // namespace

void RegisterElementwiseKernels(KernelTable& t) {
  t.Add("add", "loop_add", kAll, [](KernelCall& c) { return AddKernel(c, 1.0); });
  t.Add("sub", "loop_sub", kFloatInt, [](KernelCall& c) { return AddKernel(c, -1.0); });
  t.Add("mul", "loop_mul", kAll, MulKernel);
  t.Add("div", "loop_div", kAll, DivKernel);
  t.Add("pow", "loop_pow", kFloatInt, PowKernel);
  t.Add("maximum", "loop_maximum", kAll, MaximumKernel);
  t.Add("minimum", "loop_minimum", kAll, MinimumKernel);
  t.Add("where", Kernel{"loop_where", WhereSupports, WhereKernel});
  RegisterUnaryMathKernels(t);
  RegisterComparisonKernels(t);
  RegisterBinaryFunctionKernels(t);
  RegisterUnaryTranscendentalKernels(t);
  RegisterFusedElementwiseKernels(t);
}

}  // namespace tensord::cpu
