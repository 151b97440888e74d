// Loop kernels for var, std, logsumexp and their gradients (double accumulation).
#include <limits>

#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/reduction_kernels.h"
#include "server/ops/reduction.h"

namespace tensord::cpu {
namespace {

// torch divides by max(0, N - correction): N <= correction gives inf (or NaN for 0/0).
double Divisor(double n, double correction) { return std::max(0.0, n - correction); }

// The two-pass algorithm in double: the mean, then the sum of squared deviations from it
// (stable where sum(x^2) - n mean^2 would cancel), each pass vectorizable.
template <bool kStd>
absl::Status VarKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(auto dims, ReductionDims(c.op.name, c.attrs, x.rank()));
  ASSIGN_OR_RETURN(BlockInput in, ToBlockForm(x, dims, c.account));
  const ReduceBlock& b = in.block;
  const double n = static_cast<double>(b.size);
  ASSIGN_OR_RETURN(const double correction, VarCorrection(c.op.name, c.attrs));
  const double divisor = Divisor(n, correction);
  TENSORD_DISPATCH_FLOAT(x.dtype(), [&] {
    const T* p = in.data.data<T>();
    std::vector<double> mean(b.outer * b.inner), m2(b.outer * b.inner);
    SumBlocks(
        p, b, [](T v, int64_t) { return static_cast<double>(v); }, mean.data());
    for (double& m : mean) m /= n;
    const double* mp = mean.data();
    SumBlocks(
        p, b,
        [mp](T v, int64_t slot) {
          const double d = v - mp[slot];
          return d * d;
        },
        m2.data());
    T* q = c.outputs[0].data<T>();
    for (size_t slot = 0; slot < m2.size(); ++slot) {
      const double var = m2[slot] / divisor;
      q[slot] = static_cast<T>(kStd ? std::sqrt(var) : var);
    }
  });
  return absl::OkStatus();
}

// Stable log-sum-exp: m = max, then m + log(sum(exp(x - m))). An infinite or NaN maximum is
// the result itself (all -inf gives -inf, any +inf gives +inf, any NaN gives NaN).
absl::Status LogSumExpKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(auto dims, ReductionDims(c.op.name, c.attrs, x.rank()));
  ASSIGN_OR_RETURN(BlockInput in, ToBlockForm(x, dims, c.account));
  const ReduceBlock& b = in.block;
  TENSORD_DISPATCH_FLOAT(x.dtype(), [&] {
    const T* p = in.data.data<T>();
    const int64_t slots = b.outer * b.inner;
    std::vector<T> m(slots, -std::numeric_limits<T>::infinity());
    ReduceBlocks(
        p, b, -std::numeric_limits<T>::infinity(),
        [](T& a, T v, int64_t) {
          if (Beats<true>(v, a)) a = v;
        },
        [&](int64_t slot, T a) { m[slot] = a; });
    std::vector<double> s(slots);
    const T* mp = m.data();
    // exp in the input's precision (expf for f32): the sum is still accumulated in double.
    SumBlocks(
        p, b, [mp](T v, int64_t slot) { return static_cast<double>(std::exp(v - mp[slot])); },
        s.data());
    T* q = c.outputs[0].data<T>();
    for (int64_t slot = 0; slot < slots; ++slot) {
      const double mx = m[slot];
      q[slot] = static_cast<T>(std::isfinite(mx) ? mx + std::log(s[slot]) : mx);
    }
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
  const double divisor = Divisor(n, c.attrs.GetFloat("correction"));
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
