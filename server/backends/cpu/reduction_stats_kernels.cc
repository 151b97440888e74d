// Loop kernels for var, std, logsumexp and their gradients (double accumulation).
#include <limits>

#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/reduction_kernels.h"
#include "server/ops/reduction.h"

namespace tensord::cpu {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Welford's running mean and sum of squared deviations: stable when the mean is large
// compared with the spread, where sum(x^2) - n*mean^2 loses every digit.
struct Moments {
  double n = 0, mean = 0, m2 = 0;
};

// torch divides by max(0, N - correction): N <= correction gives inf (or NaN for 0/0).
double Divisor(double n, double correction) { return std::max(0.0, n - correction); }

double CorrectionOf(const Attrs& a) {
  if (a.Has("unbiased")) return a.GetBool("unbiased") ? 1.0 : 0.0;
  return a.GetFloat("correction", 1.0);
}

template <bool kStd>
absl::Status VarKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(auto dims, ReductionDims(c.op.name, c.attrs, x.rank()));
  ASSIGN_OR_RETURN(BlockInput in, ToBlockForm(x, dims, c.account));
  const double correction = CorrectionOf(c.attrs);
  TENSORD_DISPATCH_FLOAT(x.dtype(), [&] {
    T* q = c.outputs[0].data<T>();
    ReduceBlocks(
        in.data.data<T>(), in.block, Moments{},
        [](Moments& m, T v, int64_t) {
          m.n += 1;
          const double d = v - m.mean;
          m.mean += d / m.n;
          m.m2 += d * (v - m.mean);
        },
        [&](int64_t slot, const Moments& m) {
          const double var = m.m2 / Divisor(m.n, correction);
          q[slot] = static_cast<T>(kStd ? std::sqrt(var) : var);
        });
  });
  return absl::OkStatus();
}

// Online log-sum-exp: the running maximum m and s = sum(exp(x - m)), rescaled when m grows,
// so nothing overflows and one pass suffices.
struct LogSumExp {
  double m = -kInf, s = 0;
  bool nan = false;
};

absl::Status LogSumExpKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(auto dims, ReductionDims(c.op.name, c.attrs, x.rank()));
  ASSIGN_OR_RETURN(BlockInput in, ToBlockForm(x, dims, c.account));
  TENSORD_DISPATCH_FLOAT(x.dtype(), [&] {
    T* q = c.outputs[0].data<T>();
    ReduceBlocks(
        in.data.data<T>(), in.block, LogSumExp{},
        [](LogSumExp& a, T e, int64_t) {
          const double v = e;
          if (v > a.m) {
            a.s = (a.m == -kInf ? 0.0 : a.s * std::exp(a.m - v)) + 1.0;
            a.m = v;
          } else if (v == a.m) {
            a.s += 1.0;  // also +inf after +inf, where exp(v - m) would be NaN
          } else if (v < a.m) {
            a.s += std::exp(v - a.m);
          } else {
            a.nan = true;
          }
        },
        [&](int64_t slot, const LogSumExp& a) {
          // All -inf, or nothing to reduce: the sum of exps is 0 and its log -inf.
          q[slot] = static_cast<T>(a.nan ? kNaN : a.m == -kInf ? -kInf : a.m + std::log(a.s));
        });
  });
  return absl::OkStatus();
}

// Per-slot mean of `x` over `dims` (for the variance gradient).
template <typename T>
std::vector<double> SlotMeans(const Tensor& x, const std::vector<int64_t>& dims, int64_t slots,
                              double count) {
  std::vector<double> mean(slots, 0.0);
  const T* p = x.data<T>();
  ForEachReduced(x.shape(), dims, [&](int64_t i, int64_t slot) { mean[slot] += p[i]; });
  for (double& m : mean) m /= count;
  return mean;
}

// d var / dx = 2 (x - mean) / (N - correction);  d std / dx = (x - mean) / ((N - c) std).
absl::Status VarBackwardKernel(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  const Tensor& x = c.inputs[1];
  const Tensor& res = c.inputs[2];
  ASSIGN_OR_RETURN(auto dims, ReductionDims(c.op.name, c.attrs, x.rank()));
  const double n = static_cast<double>(ReducedCount(x.shape(), dims));
  const double divisor = Divisor(n, c.attrs.GetFloat("correction", 1.0));
  const bool is_std = c.attrs.GetBool("std");
  TENSORD_DISPATCH_FLOAT(x.dtype(), [&] {
    std::vector<double> mean = SlotMeans<T>(x, dims, res.numel(), n);
    const T* xp = x.data<T>();
    const T* gp = g.data<T>();
    const T* rp = res.data<T>();
    T* out = c.outputs[0].data<T>();
    ForEachReduced(x.shape(), dims, [&](int64_t i, int64_t slot) {
      const double scale = is_std ? 1.0 / (divisor * rp[slot]) : 2.0 / divisor;
      out[i] = static_cast<T>(gp[slot] * (xp[i] - mean[slot]) * scale);
    });
  });
  return absl::OkStatus();
}

// d logsumexp / dx = exp(x - result).
absl::Status LogSumExpBackwardKernel(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  const Tensor& x = c.inputs[1];
  const Tensor& res = c.inputs[2];
  ASSIGN_OR_RETURN(auto dims, ReductionDims(c.op.name, c.attrs, x.rank()));
  TENSORD_DISPATCH_FLOAT(x.dtype(), [&] {
    const T* xp = x.data<T>();
    const T* gp = g.data<T>();
    const T* rp = res.data<T>();
    T* out = c.outputs[0].data<T>();
    ForEachReduced(x.shape(), dims, [&](int64_t i, int64_t slot) {
      out[i] = static_cast<T>(gp[slot] * std::exp(static_cast<double>(xp[i]) - rp[slot]));
    });
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterStatisticKernels(KernelTable& t) {
  t.Add("var", "loop_var", kFloat, VarKernel<false>);
  t.Add("std", "loop_std", kFloat, VarKernel<true>);
  t.Add("logsumexp", "loop_logsumexp", kFloat, LogSumExpKernel);
  t.Add("var_backward", "loop_var_backward", kFloat, VarBackwardKernel);
  t.Add("logsumexp_backward", "loop_logsumexp_backward", kFloat, LogSumExpBackwardKernel);
}

}  // namespace tensord::cpu
