// Loop kernels for activations, their fused backward ops, and softmax / log_softmax along a
// dim (max-subtracted, so large inputs do not overflow).
#include "server/backends/cpu/activation_kernels.h"

#include <cmath>
#include <limits>
#include <vector>

namespace tensord::cpu {
namespace {

constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2*pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kGeluKappa = 0.044715;

absl::Status Relu(KernelCall& c) {
  VisitDType<kFI>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    // NaN stays NaN (x < 0 is false for it), as with torch.relu.
    UnaryLoop<T, T>(c.inputs[0], c.outputs[0], [](T x) { return x < T(0) ? T(0) : x; });
  });
  return absl::OkStatus();
}

// sigmoid and tanh: integer and bool inputs compute in f32.
template <typename Op>
absl::Status FloatFunction(KernelCall& c, Op op) {
  VisitDType<kFIB>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      UnaryLoop<T, T>(c.inputs[0], c.outputs[0], [op](T x) { return op(x); });
    } else {
      UnaryLoop<T, float>(c.inputs[0], c.outputs[0],
                          [op](T x) { return op(static_cast<float>(x)); });
    }
  });
  return absl::OkStatus();
}

// Two loops rather than a per-element branch on the approximation.
absl::Status Gelu(KernelCall& c) {
  if (c.attrs.GetString("approximate", "none") == "tanh") {
    return FloatUnary(c, [](auto tag) {
      using T = decltype(tag);
      return [](T x) {
        const T inner = T(kSqrt2OverPi) * (x + T(kGeluKappa) * x * x * x);
        return T(0.5) * x * (T(1) + std::tanh(inner));
      };
    });
  }
  return FloatUnary(c, [](auto tag) {
    using T = decltype(tag);
    return [](T x) { return T(0.5) * x * (T(1) + std::erf(x * T(kSqrt1_2))); };
  });
}

absl::Status GeluBackward(KernelCall& c) {
  if (c.attrs.GetString("approximate", "none") == "tanh") {
    return FloatBinary(c, [](auto tag) {
      using T = decltype(tag);
      return [](T g, T x) {
        const T x2 = x * x;
        const T t = std::tanh(T(kSqrt2OverPi) * (x + T(kGeluKappa) * x2 * x));
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
  const double beta = c.attrs.GetFloat("beta", 1.0);
  const double threshold = c.attrs.GetFloat("threshold", 20.0);
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

// softmax (kLog = false) or log_softmax of x along the split's middle dim, computed in Out.
template <bool kLog, typename In, typename Out>
void SoftmaxLoop(const In* x, Out* y, const DimSplit& s) {
  if (s.size == 0 || s.inner == 0) return;
  const Out neg_inf = -std::numeric_limits<Out>::infinity();
  // Per-column running max and sum; for a last-dim softmax this is a single column.
  std::vector<Out> mx(s.inner), sum(s.inner);
  for (int64_t o = 0; o < s.outer; ++o) {
    const In* xo = x + o * s.size * s.inner;
    Out* yo = y + o * s.size * s.inner;
    std::fill(mx.begin(), mx.end(), neg_inf);
    std::fill(sum.begin(), sum.end(), Out(0));
    for (int64_t k = 0; k < s.size; ++k) {
      const In* xk = xo + k * s.inner;
      for (int64_t j = 0; j < s.inner; ++j) mx[j] = MaxNaN(mx[j], static_cast<Out>(xk[j]));
    }
    for (int64_t k = 0; k < s.size; ++k) {
      const In* xk = xo + k * s.inner;
      Out* yk = yo + k * s.inner;
      for (int64_t j = 0; j < s.inner; ++j) {
        const Out e = std::exp(static_cast<Out>(xk[j]) - mx[j]);
        if (!kLog) yk[j] = e;
        sum[j] += e;
      }
    }
    // log_softmax subtracts the max before the log-sum, (x - max) - log(sum), so that large
    // inputs keep full precision instead of cancelling against max + log(sum).
    for (int64_t j = 0; j < s.inner; ++j) sum[j] = kLog ? std::log(sum[j]) : Out(1) / sum[j];
    for (int64_t k = 0; k < s.size; ++k) {
      const In* xk = xo + k * s.inner;
      Out* yk = yo + k * s.inner;
      for (int64_t j = 0; j < s.inner; ++j) {
        yk[j] = kLog ? (static_cast<Out>(xk[j]) - mx[j]) - sum[j] : yk[j] * sum[j];
      }
    }
  }
}

template <bool kLog>
absl::Status SoftmaxKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  int64_t dim = c.attrs.GetInt("dim");
  if (dim < 0) dim += x.rank();
  const DimSplit split = SplitAt(x.shape(), dim);
  VisitDType<kF>(x.dtype(), [&](auto in_tag) {
    using In = decltype(in_tag);
    VisitDType<kF>(out.dtype(), [&](auto out_tag) {
      using Out = decltype(out_tag);
      SoftmaxLoop<kLog>(x.data<In>(), out.data<Out>(), split);
    });
  });
  return absl::OkStatus();
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

  t.Add("sigmoid", "loop_sigmoid", kAll, [](KernelCall& c) {
    return FloatFunction(c,
                         [](auto x) { return decltype(x)(1) / (decltype(x)(1) + std::exp(-x)); });
  });
  t.Add("sigmoid_backward", "loop_sigmoid_backward", kFloat, [](KernelCall& c) {
    return FloatBinary(c, [](auto tag) {
      using T = decltype(tag);
      return [](T g, T y) { return g * (T(1) - y) * y; };
    });
  });

  t.Add("tanh", "loop_tanh", kAll,
        [](KernelCall& c) { return FloatFunction(c, [](auto x) { return std::tanh(x); }); });
  t.Add("tanh_backward", "loop_tanh_backward", kFloat, [](KernelCall& c) {
    return FloatBinary(c, [](auto tag) {
      using T = decltype(tag);
      return [](T g, T y) { return g * (T(1) - y * y); };
    });
  });

  t.Add("gelu", "loop_gelu", kFloat, Gelu);
  t.Add("gelu_backward", "loop_gelu_backward", kFloat, GeluBackward);

  t.Add("silu", "loop_silu", kFloat, [](KernelCall& c) {
    return FloatUnary(c, [](auto tag) {
      using T = decltype(tag);
      return [](T x) { return x / (T(1) + std::exp(-x)); };
    });
  });
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
    const double slope = c.attrs.GetFloat("negative_slope", 0.01);
    return FloatUnary(c, [slope](auto tag) {
      using T = decltype(tag);
      const T a = T(slope);
      return [a](T x) { return x > T(0) ? x : x * a; };
    });
  });
  t.Add("leaky_relu_backward", "loop_leaky_relu_backward", kFloat, [](KernelCall& c) {
    const double slope = c.attrs.GetFloat("negative_slope", 0.01);
    return FloatBinary(c, [slope](auto tag) {
      using T = decltype(tag);
      const T a = T(slope);
      return [a](T g, T x) { return x > T(0) ? g : g * a; };
    });
  });

  t.Add("elu", "loop_elu", kFloat, [](KernelCall& c) {
    const double alpha = c.attrs.GetFloat("alpha", 1.0);
    return FloatUnary(c, [alpha](auto tag) {
      using T = decltype(tag);
      const T a = T(alpha);
      return [a](T x) { return x > T(0) ? x : a * std::expm1(x); };
    });
  });
  t.Add("elu_backward", "loop_elu_backward", kFloat, [](KernelCall& c) {
    const double alpha = c.attrs.GetFloat("alpha", 1.0);
    return FloatBinary(c, [alpha](auto tag) {
      using T = decltype(tag);
      const T a = T(alpha);
      return [a](T g, T x) { return x > T(0) ? g : g * a * std::exp(x); };
    });
  });

  t.Add("softmax", "loop_softmax", kFloat, SoftmaxKernel<false>);
  t.Add("log_softmax", "loop_log_softmax", kFloat, SoftmaxKernel<true>);
  RegisterActivationTier2Kernels(t);
}

}  // namespace tensord::cpu
