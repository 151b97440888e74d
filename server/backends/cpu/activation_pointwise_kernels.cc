// Loop kernels for the smooth pointwise activations and their fused backward ops: relu (and its
// leaky and exponential kin), sigmoid, tanh, gelu, silu, softplus, mish, softsign, logsigmoid,
// tanhshrink. Those with kinks PyTorch defines branch by branch are in
// activation_piecewise_kernels.cc, those along a dim in activation_dim_kernels.cc.
#include <cmath>
#include <limits>
#include <vector>

#include "server/backends/cpu/activation_kernels.h"
#include "server/backends/cpu/pointwise_functions.h"

namespace tensord::cpu {
namespace {

using pointwise::kGeluKappa;
using pointwise::kInvSqrt2Pi;
using pointwise::kSqrt1_2;
using pointwise::kSqrt2OverPi;

absl::Status Relu(KernelCall& c) {
  VisitDType<kFI>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    UnaryLoop<T, T>(c.inputs[0], c.outputs[0], pointwise::Relu{});
  });
  return absl::OkStatus();
}

// sigmoid and tanh: integer and bool inputs compute in f32.
template <typename Op>
absl::Status FloatFunction(KernelCall& c, Op op) {
  VisitDType<kFIB>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      UnaryLoop<T, T>(c.inputs[0], c.outputs[0], op);
    } else {
      UnaryLoop<T, float>(c.inputs[0], c.outputs[0],
                          [op](T x) { return op(static_cast<float>(x)); });
    }
  });
  return absl::OkStatus();
}

// Two loops rather than a per-element branch on the approximation.
absl::Status Gelu(KernelCall& c) {
  if (c.attrs.GetString("approximate") == "tanh") {
    return FloatUnary(c, [](auto) { return pointwise::GeluTanh{}; });
  }
  return FloatUnary(c, [](auto) { return pointwise::Gelu{}; });
}

absl::Status GeluBackward(KernelCall& c) {
  if (c.attrs.GetString("approximate") == "tanh") {
    return FloatBinary(c, [](auto tag) {
      using T = decltype(tag);
      return [](T g, T x) {
        const T x2 = x * x;
        const T t = pointwise::TanhOf(T(kSqrt2OverPi) * (x + T(kGeluKappa) * x2 * x));
        const T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluKappa) * x2);
        return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner);
      };
    });
  }
  return FloatBinary(c, [](auto tag) {
    using T = decltype(tag);
    return [](T g, T x) {
      const T cdf = T(0.5) * (T(1) + std::erf(x * T(kSqrt1_2)));
      const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x);
      return g * (cdf + x * pdf);
    };
  });
}

absl::Status Softplus(KernelCall& c, bool backward) {
  const double beta = c.attrs.GetFloat("beta");
  const double threshold = c.attrs.GetFloat("threshold");
  if (backward) {
    return FloatBinary(c, [&](auto tag) {
      using T = decltype(tag);
      const T b = T(beta), th = T(threshold);
      return [b, th](T g, T x) {
        const T z = std::exp(x * b);
        return x * b > th ? g : g * z / (z + T(1));
      };
    });
  }
  return FloatUnary(c, [&](auto tag) {
    using T = decltype(tag);
    const T b = T(beta), th = T(threshold);
    return [b, th](T x) { return x * b > th ? x : std::log1p(std::exp(x * b)) / b; };
  });
}

}  // namespace

void RegisterActivationKernels(KernelTable& t) {
  t.Add("relu", "loop_relu", kFloatInt, Relu);
  t.Add("relu_backward", "loop_relu_backward", kFloat, [](KernelCall& c) {
    return FloatBinary(c, [](auto tag) {
      using T = decltype(tag);
      // PyTorch's threshold_backward on the output: zero where y <= 0, so relu'(0) = 0.
      return [](T g, T y) { return y <= T(0) ? T(0) : g; };
    });
  });

  t.Add("sigmoid", "loop_sigmoid", kAll,
        [](KernelCall& c) { return FloatFunction(c, pointwise::Sigmoid{}); });
  t.Add("sigmoid_backward", "loop_sigmoid_backward", kFloat, [](KernelCall& c) {
    return FloatBinary(c, [](auto tag) {
      using T = decltype(tag);
      return [](T g, T y) { return g * (T(1) - y) * y; };
    });
  });

  t.Add("tanh", "loop_tanh", kAll,
        [](KernelCall& c) { return FloatFunction(c, pointwise::Tanh{}); });
  t.Add("tanh_backward", "loop_tanh_backward", kFloat, [](KernelCall& c) {
    return FloatBinary(c, [](auto tag) {
      using T = decltype(tag);
      return [](T g, T y) { return g * (T(1) - y * y); };
    });
  });

  t.Add("gelu", "loop_gelu", kFloat, Gelu);
  t.Add("gelu_backward", "loop_gelu_backward", kFloat, GeluBackward);

  t.Add("silu", "loop_silu", kFloat,
        [](KernelCall& c) { return FloatUnary(c, [](auto) { return pointwise::Silu{}; }); });
  t.Add("silu_backward", "loop_silu_backward", kFloat, [](KernelCall& c) {
    return FloatBinary(c, [](auto tag) {
      using T = decltype(tag);
      return [](T g, T x) {
        const T s = T(1) / (T(1) + std::exp(-x));
        return g * s * (T(1) + x * (T(1) - s));
      };
    });
  });

  t.Add("softplus", "loop_softplus", kFloat, [](KernelCall& c) { return Softplus(c, false); });
  t.Add("softplus_backward", "loop_softplus_backward", kFloat,
        [](KernelCall& c) { return Softplus(c, true); });

  t.Add("leaky_relu", "loop_leaky_relu", kFloat, [](KernelCall& c) {
    const double slope = c.attrs.GetFloat("negative_slope");
    return FloatUnary(c, [slope](auto tag) {
      using T = decltype(tag);
      return pointwise::LeakyRelu<T>{T(slope)};
    });
  });
  t.Add("leaky_relu_backward", "loop_leaky_relu_backward", kFloat, [](KernelCall& c) {
    const double slope = c.attrs.GetFloat("negative_slope");
    return FloatBinary(c, [slope](auto tag) {
      using T = decltype(tag);
      const T a = T(slope);
      return [a](T g, T x) { return x > T(0) ? g : g * a; };
    });
  });

  t.Add("elu", "loop_elu", kFloat, [](KernelCall& c) {
    const double alpha = c.attrs.GetFloat("alpha");
    return FloatUnary(c, [alpha](auto tag) {
      using T = decltype(tag);
      return pointwise::Elu<T>{T(alpha)};
    });
  });
  t.Add("elu_backward", "loop_elu_backward", kFloat, [](KernelCall& c) {
    const double alpha = c.attrs.GetFloat("alpha");
    return FloatBinary(c, [alpha](auto tag) {
      using T = decltype(tag);
      const T a = T(alpha);
      return [a](T g, T x) { return x > T(0) ? g : g * a * std::exp(x); };
    });
  });

  // mish(x) = x * tanh(softplus(x)), softplus without a threshold as in PyTorch's kernel.
  AddPair(
      t, "mish",
      [](auto tag) {
        using T = decltype(tag);
        return [](T x) { return x * pointwise::TanhOf(std::log1p(std::exp(x))); };
      },
      [](auto tag) {
        using T = decltype(tag);
        return [](T g, T x) {
          const T sig = T(1) / (T(1) + std::exp(-x));
          const T tsp = pointwise::TanhOf(std::log1p(std::exp(x)));
          return g * (tsp + x * sig * (T(1) - tsp * tsp));
        };
      });
  AddPair(
      t, "softsign",
      [](auto tag) {
        using T = decltype(tag);
        return [](T x) { return x / (T(1) + std::abs(x)); };
      },
      [](auto tag) {
        using T = decltype(tag);
        return [](T g, T x) {
          const T d = T(1) + std::abs(x);
          return g / (d * d);
        };
      });
  // log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): no overflow for either sign.
  AddPair(
      t, "logsigmoid",
      [](auto tag) {
        using T = decltype(tag);
        return [](T x) { return std::min(x, T(0)) - std::log1p(std::exp(-std::abs(x))); };
      },
      [](auto tag) {
        using T = decltype(tag);
        return [](T g, T x) {
          const T z = std::exp(-std::abs(x));
          return x < T(0) ? g / (T(1) + z) : g * z / (T(1) + z);
        };
      });
  AddPair(
      t, "tanhshrink",
      [](auto tag) {
        using T = decltype(tag);
        return [](T x) { return x - pointwise::TanhOf(x); };
      },
      [](auto tag) {
        using T = decltype(tag);
        return [](T g, T x) {
          const T th = pointwise::TanhOf(x);
          return g * th * th;
        };
      });

  // x * 0 inside [-lambd, lambd] keeps NaN, as PyTorch's kernel does since it stopped mapping
  // NaN to 0.
  RegisterActivationPiecewiseKernels(t);
  RegisterActivationDimKernels(t);
}

}  // namespace tensord::cpu
