// Loop kernels for the activations that work along a dim: softmax and log_softmax
// (max-subtracted, so large inputs do not overflow), prelu (one slope per channel, dim 1) and glu
// (halves of a dim), with their fused backward ops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "server/backends/cpu/activation_kernels.h"

namespace tensord::cpu {
namespace {

// prelu's layout: `outer` blocks of `channels` runs of `inner` elements; slope index = channel.
// One shared slope is a single channel over everything.
DimSplit PreluSplit(const Tensor& x, const Tensor& w) {
  if (w.numel() == 1 || x.rank() < 2) return DimSplit{1, 1, x.numel()};
  return SplitAt(x.shape(), 1);
}

absl::Status Prelu(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& w = c.inputs[1];
  const DimSplit s = PreluSplit(x, w);
  VisitDType<kF>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    const T* wp = w.data<T>();
    T* yp = c.outputs[0].data<T>();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t ch = 0; ch < s.size; ++ch) {
        const T slope = wp[ch];
        const int64_t base = (o * s.size + ch) * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) {
          const T v = xp[base + i];
          yp[base + i] = v > T(0) ? v : slope * v;
        }
      }
    }
  });
  return absl::OkStatus();
}

// (grad_output, input, weight) → (grad_input, grad_weight). x == 0 takes the slope branch for
// the input gradient and contributes x * g = 0 to the weight's, as in PyTorch. Weight sums
// accumulate in double.
absl::Status PreluBackward(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  const Tensor& x = c.inputs[1];
  const Tensor& w = c.inputs[2];
  const DimSplit s = PreluSplit(x, w);
  VisitDType<kF>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* gp = g.data<T>();
    const T* xp = x.data<T>();
    const T* wp = w.data<T>();
    T* gx = c.outputs[0].data<T>();
    std::vector<double> gw(s.size, 0.0);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t ch = 0; ch < s.size; ++ch) {
        const T slope = wp[ch];
        const int64_t base = (o * s.size + ch) * s.inner;
        double acc = 0;
        for (int64_t i = 0; i < s.inner; ++i) {
          const T v = xp[base + i];
          const T gi = gp[base + i];
          const bool pos = v > T(0);
          gx[base + i] = pos ? gi : slope * gi;
          acc += pos ? 0.0 : static_cast<double>(v) * static_cast<double>(gi);
        }
        gw[ch] += acc;
      }
    }
    T* gwp = c.outputs[1].data<T>();
    for (int64_t ch = 0; ch < s.size; ++ch) gwp[ch] = static_cast<T>(gw[ch]);
  });
  return absl::OkStatus();
}

DimSplit GluSplit(const Tensor& x, const Attrs& attrs) {
  int64_t dim = attrs.GetInt("dim");
  if (dim < 0) dim += x.rank();
  return SplitAt(x.shape(), dim);
}

template <typename T>
T Sigmoid(T v) {
  return T(1) / (T(1) + std::exp(-v));
}

// glu(x) = a * sigmoid(b), a and b the first and second halves of `dim`.
absl::Status Glu(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const DimSplit s = GluSplit(x, c.attrs);
  const int64_t half = s.size / 2;
  VisitDType<kF>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = c.outputs[0].data<T>();
    for (int64_t o = 0; o < s.outer; ++o) {
      const T* a = xp + o * s.size * s.inner;
      const T* b = a + half * s.inner;
      T* y = yp + o * half * s.inner;
      for (int64_t i = 0; i < half * s.inner; ++i) y[i] = a[i] * Sigmoid(b[i]);
    }
  });
  return absl::OkStatus();
}

// (grad_output, input) → grad_input: d/da = g * sig(b), d/db = g * a * sig(b) * (1 - sig(b)).
absl::Status GluBackward(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  const Tensor& x = c.inputs[1];
  const DimSplit s = GluSplit(x, c.attrs);
  const int64_t half = s.size / 2;
  VisitDType<kF>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    const T* gp = g.data<T>();
    T* gxp = c.outputs[0].data<T>();
    for (int64_t o = 0; o < s.outer; ++o) {
      const T* a = xp + o * s.size * s.inner;
      const T* b = a + half * s.inner;
      const T* go = gp + o * half * s.inner;
      T* ga = gxp + o * s.size * s.inner;
      T* gb = ga + half * s.inner;
      for (int64_t i = 0; i < half * s.inner; ++i) {
        const T sig = Sigmoid(b[i]);
        ga[i] = go[i] * sig;
        gb[i] = go[i] * a[i] * sig * (T(1) - sig);
      }
    }
  });
  return absl::OkStatus();
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

void RegisterActivationDimKernels(KernelTable& t) {
  t.Add("softmax", "loop_softmax", kFloat, SoftmaxKernel<false>);
  t.Add("log_softmax", "loop_log_softmax", kFloat, SoftmaxKernel<true>);
  t.Add("prelu", "loop_prelu", kFloat, Prelu);
  t.Add("prelu_backward", "loop_prelu_backward", kFloat, PreluBackward);
  t.Add("glu", "loop_glu", kFloat, Glu);
  t.Add("glu_backward", "loop_glu_backward", kFloat, GluBackward);
}

}  // namespace tensord::cpu
