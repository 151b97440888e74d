// Loop kernels for the piecewise pointwise activations and their fused backward ops: relu6,
// hardtanh, selu, celu, hardsigmoid, hardswish, softshrink, hardshrink, threshold. Forward
// formulas and the branch each boundary point takes follow PyTorch's CPU kernels, so that
// values and gradients at kinks (x == min_val, x == -3, x == lambd, ...) agree with it.
#include <algorithm>
#include <cmath>

#include "server/backends/cpu/activation_kernels.h"

namespace tensord::cpu {
namespace {

constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

// clamp(x, lo, hi); NaN stays NaN. relu6 is hardtanh(0, 6).
absl::Status Hardtanh(KernelCall& c, double lo, double hi) {
  return FloatUnary(c, [lo, hi](auto tag) {
    using T = decltype(tag);
    const T l = T(lo), h = T(hi);
    return [l, h](T x) { return x < l ? l : (x > h ? h : x); };
  });
}
// Zero on the bounds themselves, like PyTorch's hardtanh_backward.
absl::Status HardtanhBackward(KernelCall& c, double lo, double hi) {
  return FloatBinary(c, [lo, hi](auto tag) {
    using T = decltype(tag);
    const T l = T(lo), h = T(hi);
    return [l, h](T g, T x) { return (x <= l || x >= h) ? T(0) : g; };
  });
}

// celu(x) = x > 0 ? x : alpha * (exp(x / alpha) - 1); the x <= 0 branch owns 0, as in elu.
absl::Status Celu(KernelCall& c, bool backward) {
  const double alpha = c.attrs.GetFloat("alpha");
  if (backward) {
    return FloatBinary(c, [alpha](auto tag) {
      using T = decltype(tag);
      const T inv = T(1.0 / alpha);
      return [inv](T g, T x) { return x > T(0) ? g : g * std::exp(x * inv); };
    });
  }
  return FloatUnary(c, [alpha](auto tag) {
    using T = decltype(tag);
    const T a = T(alpha), inv = T(1.0 / alpha);
    return [a, inv](T x) { return x > T(0) ? x : a * std::expm1(x * inv); };
  });
}

// softshrink and hardshrink share their backward: zero on [-lambd, lambd].
absl::Status ShrinkBackward(KernelCall& c) {
  const double lambd = c.attrs.GetFloat("lambd");
  return FloatBinary(c, [lambd](auto tag) {
    using T = decltype(tag);
    const T l = T(lambd);
    return [l](T g, T x) { return (x >= -l && x <= l) ? T(0) : g; };
  });
}

}  // namespace

void RegisterActivationPiecewiseKernels(KernelTable& t) {
  t.Add("relu6", "loop_relu6", kFloat, [](KernelCall& c) { return Hardtanh(c, 0, 6); });
  t.Add("relu6_backward", "loop_relu6_backward", kFloat,
        [](KernelCall& c) { return HardtanhBackward(c, 0, 6); });
  t.Add("hardtanh", "loop_hardtanh", kFloat, [](KernelCall& c) {
    return Hardtanh(c, c.attrs.GetFloat("min_val"), c.attrs.GetFloat("max_val"));
  });
  t.Add("hardtanh_backward", "loop_hardtanh_backward", kFloat, [](KernelCall& c) {
    return HardtanhBackward(c, c.attrs.GetFloat("min_val"), c.attrs.GetFloat("max_val"));
  });

  AddPair(
      t, "selu",
      [](auto tag) {
        using T = decltype(tag);
        return [](T x) {
          return x > T(0) ? T(kSeluScale) * x : T(kSeluScale * kSeluAlpha) * std::expm1(x);
        };
      },
      [](auto tag) {
        using T = decltype(tag);
        return [](T g, T x) {
          return x > T(0) ? g * T(kSeluScale) : g * T(kSeluScale * kSeluAlpha) * std::exp(x);
        };
      });
  t.Add("celu", "loop_celu", kFloat, [](KernelCall& c) { return Celu(c, false); });
  t.Add("celu_backward", "loop_celu_backward", kFloat, [](KernelCall& c) { return Celu(c, true); });

  // PyTorch's min(max(x + 3, 0), 6) / 6 (NaN propagates); the gradient is 1/6 strictly
  // inside (-3, 3) and zero on the bounds.
  AddPair(
      t, "hardsigmoid",
      [](auto tag) {
        using T = decltype(tag);
        return [](T x) { return std::min(std::max(x + T(3), T(0)), T(6)) / T(6); };
      },
      [](auto tag) {
        using T = decltype(tag);
        return [](T g, T x) { return (x > T(-3) && x < T(3)) ? g / T(6) : T(0); };
      });
  // PyTorch's hardswish_backward: x < -3 gives 0 and -3 <= x <= 3 gives x / 3 + 0.5, so the
  // bounds themselves get -0.5 and 1.5.
  AddPair(
      t, "hardswish",
      [](auto tag) {
        using T = decltype(tag);
        return [](T x) { return x * std::min(std::max(x + T(3), T(0)), T(6)) / T(6); };
      },
      [](auto tag) {
        using T = decltype(tag);
        return [](T g, T x) {
          if (x < T(-3)) return T(0);
          return x <= T(3) ? g * (x / T(3) + T(0.5)) : g;
        };
      });
  t.Add("softshrink", "loop_softshrink", kFloat, [](KernelCall& c) {
    const double lambd = c.attrs.GetFloat("lambd");
    return FloatUnary(c, [lambd](auto tag) {
      using T = decltype(tag);
      const T l = T(lambd);
      return [l](T x) { return x > l ? x - l : (x < -l ? x + l : x * T(0)); };
    });
  });
  t.Add("softshrink_backward", "loop_softshrink_backward", kFloat, ShrinkBackward);
  t.Add("hardshrink", "loop_hardshrink", kFloat, [](KernelCall& c) {
    const double lambd = c.attrs.GetFloat("lambd");
    return FloatUnary(c, [lambd](auto tag) {
      using T = decltype(tag);
      const T l = T(lambd);
      return [l](T x) { return (x >= -l && x <= l) ? T(0) : x; };
    });
  });
  t.Add("hardshrink_backward", "loop_hardshrink_backward", kFloat, ShrinkBackward);

  // threshold(x) = x > threshold ? x : value; the gradient is zero wherever x <= threshold.
  t.Add("threshold", "loop_threshold", kFloat, [](KernelCall& c) {
    const double th = c.attrs.GetFloat("threshold"), value = c.attrs.GetFloat("value");
    return FloatUnary(c, [th, value](auto tag) {
      using T = decltype(tag);
      const T h = T(th), v = T(value);
      return [h, v](T x) { return x <= h ? v : x; };
    });
  });
  t.Add("threshold_backward", "loop_threshold_backward", kFloat, [](KernelCall& c) {
    const double th = c.attrs.GetFloat("threshold");
    return FloatBinary(c, [th](auto tag) {
      using T = decltype(tag);
      const T h = T(th);
      return [h](T g, T x) { return x <= h ? T(0) : g; };
    });
  });
}

}  // namespace tensord::cpu
