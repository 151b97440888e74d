// Loop kernels for norm and its gradient (double accumulation). The gradient follows PyTorch's
// norm_backward branch by branch, so that its values at zeros, ties and NaNs match.
#include <cmath>
#include <limits>

#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/reduction_kernels.h"
#include "server/ops/reduction.h"

namespace tensord::cpu {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double Sgn(double v) { return std::isnan(v) ? v : static_cast<double>((v > 0) - (v < 0)); }

absl::Status NormKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const double p = c.attrs.GetFloat("p");
  ASSIGN_OR_RETURN(auto dims, ReductionDims(c.op.name, c.attrs, x.rank()));
  ASSIGN_OR_RETURN(BlockInput in, ToBlockForm(x, dims, c.account));
  const ReduceBlock& b = in.block;
  TENSORD_DISPATCH_FLOAT(x.dtype(), [&] {
    const T* src = in.data.data<T>();
    T* q = c.outputs[0].data<T>();
    if (std::isinf(p)) {
      // max |x| (p = inf) or min |x| (p = -inf); a NaN wins, as in amax/amin.
      const bool largest = p > 0;
      ReduceBlocks(
          src, b, largest ? 0.0 : kInf,
          [largest](double& a, T v, int64_t) {
            const double m = std::fabs(static_cast<double>(v));
            if (std::isnan(m) || (largest ? m > a : m < a)) a = m;
          },
          [&](int64_t slot, double a) { q[slot] = static_cast<T>(a); });
      return;
    }
    std::vector<double> s(b.outer * b.inner);
    if (p == 0) {
      SumBlocks(
          src, b, [](T v, int64_t) { return v != T(0) ? 1.0 : 0.0; }, s.data());
    } else if (p == 1) {
      SumBlocks(
          src, b, [](T v, int64_t) { return std::fabs(static_cast<double>(v)); }, s.data());
    } else if (p == 2) {
      SumBlocks(
          src, b,
          [](T v, int64_t) {
            const double d = v;
            return d * d;
          },
          s.data());
      for (double& e : s) e = std::sqrt(e);
    } else {
      SumBlocks(
          src, b, [p](T v, int64_t) { return std::pow(std::fabs(static_cast<double>(v)), p); },
          s.data());
      for (double& e : s) e = std::pow(e, 1.0 / p);
    }
    for (size_t slot = 0; slot < s.size(); ++slot) q[slot] = static_cast<T>(s[slot]);
  });
  return absl::OkStatus();
}

// (grad, input, norm) -> grad of input; torch's branches:
//   p = 0: 0;  p = 1: sgn(x) g;  p = 2: g x / n, 0 where n = 0;
//   p = +-inf: sgn(x) g / k on the k elements with |x| = n (or NaN), 0 elsewhere;
//   p < 1: sgn(x) |x|^(p-1) g n^(1-p), 0 where x = 0;
//   p < 2: sgn(x) |x|^(p-1) g / n^(p-1);  else x |x|^(p-2) g / n^(p-1); both 0 where n = 0.
absl::Status NormBackwardKernel(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  const Tensor& x = c.inputs[1];
  const Tensor& res = c.inputs[2];
  const double p = c.attrs.GetFloat("p");
  ASSIGN_OR_RETURN(auto dims, ReductionDims(c.op.name, c.attrs, x.rank()));
  if (g.numel() != res.numel()) {
    return Error(Reason::kInternal, "norm_backward: the gradient does not match the norm");
  }
  TENSORD_DISPATCH_FLOAT(x.dtype(), [&] {
    const T* xp = x.data<T>();
    const T* gp = g.data<T>();
    const T* np = res.data<T>();
    T* out = c.outputs[0].data<T>();
    auto selected = [&](int64_t i, int64_t slot) {
      const double m = std::fabs(static_cast<double>(xp[i]));
      return m == static_cast<double>(np[slot]) || std::isnan(m);
    };
    std::vector<int64_t> count;
    if (std::isinf(p)) {
      count.assign(res.numel(), 0);
      ForEachReduced(x.shape(), dims,
                     [&](int64_t i, int64_t slot) { count[slot] += selected(i, slot); });
    }
    ForEachReduced(x.shape(), dims, [&](int64_t i, int64_t slot) {
      const double v = xp[i], gv = gp[slot], n = np[slot];
      double r;
      if (p == 0) {
        r = 0;
      } else if (p == 1) {
        r = Sgn(v) * gv;
      } else if (p == 2) {
        r = n == 0 ? 0.0 : gv * (v / n);
      } else if (std::isinf(p)) {
        r = Sgn(v) * ((gv / static_cast<double>(count[slot])) * (selected(i, slot) ? 1.0 : 0.0));
      } else if (p < 1) {
        const double scaled = v == 0 ? 0.0 : Sgn(v) * std::pow(std::fabs(v), p - 1);
        r = scaled * gv * std::pow(n, 1 - p);
      } else {
        const double scaled =
            p < 2 ? Sgn(v) * std::pow(std::fabs(v), p - 1) : v * std::pow(std::fabs(v), p - 2);
        r = n == 0 ? 0.0 : scaled * (gv / std::pow(n, p - 1));
      }
      out[i] = static_cast<T>(r);
    });
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterNormKernels(KernelTable& t) {
  t.Add("norm", "loop_norm", kFloat, NormKernel);
  t.Add("norm_backward", "loop_norm_backward", kFloat, NormBackwardKernel);
}

}  // namespace tensord::cpu
