// Loop kernels for cross_entropy / nll_loss: the log-softmax over the class dim, the weighted
// negative log-likelihood with label smoothing and ignore_index, and their gradients.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"
#include "server/backends/cpu/reduction_kernels.h"
#include "server/ops/reduction.h"

namespace tensord::cpu {
namespace {

// log_softmax along `dim`, a row of `inner` positions at a time so memory is read in order.
absl::Status LogSoftmax(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(int64_t dim, NormalizeDimFor(c.op.name, c.attrs.GetInt("dim"), x.rank()));
  const DimSplit s = SplitAt(x.shape(), dim);
  TENSORD_DISPATCH_FLOAT(x.dtype(), [&] {
    // Max and exp in the input's precision (expf for f32); the sums accumulate in double.
    std::vector<T> m(s.inner);
    std::vector<double> sum(s.inner);
    for (int64_t o = 0; o < s.outer; ++o) {
      const T* xp = x.data<T>() + o * s.size * s.inner;
      T* out = c.outputs[0].data<T>() + o * s.size * s.inner;
      std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t k = 0; k < s.size; ++k) {
        for (int64_t j = 0; j < s.inner; ++j) m[j] = std::max(m[j], xp[k * s.inner + j]);
      }
      for (int64_t k = 0; k < s.size; ++k) {
        for (int64_t j = 0; j < s.inner; ++j) sum[j] += std::exp(xp[k * s.inner + j] - m[j]);
      }
      for (int64_t j = 0; j < s.inner; ++j) sum[j] = static_cast<double>(m[j]) + std::log(sum[j]);
      for (int64_t k = 0; k < s.size; ++k) {
        for (int64_t j = 0; j < s.inner; ++j) {
          out[k * s.inner + j] = static_cast<T>(xp[k * s.inner + j] - sum[j]);
        }
      }
    }
  });
  return absl::OkStatus();
}

// grad_x = grad - exp(output) * sum(grad) along `dim`.
absl::Status LogSoftmaxBackward(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  const Tensor& y = c.inputs[1];
  ASSIGN_OR_RETURN(int64_t dim, NormalizeDimFor(c.op.name, c.attrs.GetInt("dim"), y.rank()));
  const DimSplit s = SplitAt(y.shape(), dim);
  TENSORD_DISPATCH_FLOAT(y.dtype(), [&] {
    std::vector<double> total(s.inner);
    for (int64_t o = 0; o < s.outer; ++o) {
      const int64_t base = o * s.size * s.inner;
      const T* gp = g.data<T>() + base;
      const T* yp = y.data<T>() + base;
      T* out = c.outputs[0].data<T>() + base;
      std::fill(total.begin(), total.end(), 0.0);
      for (int64_t k = 0; k < s.size; ++k) {
        for (int64_t j = 0; j < s.inner; ++j) total[j] += gp[k * s.inner + j];
      }
      for (int64_t k = 0; k < s.size; ++k) {
        for (int64_t j = 0; j < s.inner; ++j) {
          const int64_t i = k * s.inner + j;
          out[i] = static_cast<T>(gp[i] - std::exp(yp[i]) * total[j]);
        }
      }
    }
  });
  return absl::OkStatus();
}

// The class-index loss over log-probabilities laid out as [outer, classes, inner] with targets
// [outer, inner]. PyTorch's label smoothing: (1 - ls) * nll + ls / C * (-sum_c w_c logp_c);
// mean divides both by the summed weight of the non-ignored targets.
struct Nll {
  DimSplit s;
  int64_t ignore = -100;
  double ls = 0;
  std::string reduction, loss;
  const double* weight = nullptr;  // per class, or null for 1
  std::vector<double> weights;

  double W(int64_t c) const { return weight ? weight[c] : 1.0; }

  absl::Status RangeError(int64_t t) const { return CheckClassIndex(loss, t, s.size, ignore); }
};

absl::StatusOr<Nll> MakeNll(const KernelCall& c, const Tensor& logp, const Tensor* weight) {
  Nll n;
  n.s = SplitAt(logp.shape(), logp.rank() == 1 ? 0 : 1);
  n.ignore = c.attrs.GetInt("ignore_index");
  n.ls = c.attrs.GetFloat("label_smoothing");
  n.reduction = c.attrs.GetString("reduction");
  n.loss = c.attrs.GetString("loss");
  if (weight != nullptr) {
    n.weights = weight->ToDoubles();
    n.weight = n.weights.data();
  }
  return n;
}

// Targets as int64 (i32 targets are widened once).
std::vector<int64_t> Targets(const Tensor& target) {
  std::vector<int64_t> t(target.numel());
  TENSORD_DISPATCH_NUMERIC(target.dtype(), [&] {
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int64_t>(target.data<T>()[i]);
  });
  return t;
}

absl::Status NllForward(KernelCall& c) {
  const Tensor& logp = c.inputs[0];
  ASSIGN_OR_RETURN(Nll n, MakeNll(c, logp, c.inputs.size() > 2 ? &c.inputs[2] : nullptr));
  const std::vector<int64_t> target = Targets(c.inputs[1]);
  const int64_t C = n.s.size, inner = n.s.inner;
  absl::Status status = absl::OkStatus();
  TENSORD_DISPATCH_FLOAT(logp.dtype(), [&] {
    const T* lp = logp.data<T>();
    T* out = c.outputs[0].data<T>();
    const bool none = n.reduction == "none";
    double total = 0, total_weight = 0;
    for (int64_t o = 0; o < n.s.outer && status.ok(); ++o) {
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t slot = o * inner + j;
        const int64_t t = target[slot];
        double l = 0;
        if (t != n.ignore) {
          if (t < 0 || t >= C) {
            status = n.RangeError(t);
            break;
          }
          const T* row = lp + o * C * inner + j;
          l = -(1 - n.ls) * n.W(t) * row[t * inner];
          if (n.ls > 0) {
            double smooth = 0;
            for (int64_t k = 0; k < C; ++k) smooth -= n.W(k) * row[k * inner];
            l += n.ls / C * smooth;
          }
          total += l;
          total_weight += n.W(t);
        }
        if (none) out[slot] = static_cast<T>(l);
      }
    }
    if (!none) out[0] = static_cast<T>(n.reduction == "sum" ? total : total / total_weight);
  });
  return status;
}

absl::Status NllBackward(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  const Tensor& logp = c.inputs[1];
  ASSIGN_OR_RETURN(Nll n, MakeNll(c, logp, c.inputs.size() > 3 ? &c.inputs[3] : nullptr));
  const std::vector<int64_t> target = Targets(c.inputs[2]);
  const int64_t C = n.s.size, inner = n.s.inner;
  double total_weight = 0;
  for (int64_t t : target) {
    if (t == n.ignore) continue;
    if (t < 0 || t >= C) return n.RangeError(t);
    total_weight += n.W(t);
  }
  TENSORD_DISPATCH_FLOAT(logp.dtype(), [&] {
    const T* gp = g.data<T>();
    T* out = c.outputs[0].data<T>();
    std::fill(out, out + c.outputs[0].numel(), T(0));
    const bool none = n.reduction == "none";
    const double reduced = none ? 0.0 : static_cast<double>(gp[0]);
    const double reduced_scale = n.reduction == "mean" ? reduced / total_weight : reduced;
    for (int64_t o = 0; o < n.s.outer; ++o) {
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t slot = o * inner + j;
        const int64_t t = target[slot];
        if (t == n.ignore) continue;
        const double scale = none ? gp[slot] : reduced_scale;
        T* row = out + o * C * inner + j;
        if (n.ls > 0) {
          for (int64_t k = 0; k < C; ++k)
            row[k * inner] = static_cast<T>(-scale * n.ls / C * n.W(k));
        }
        row[t * inner] += static_cast<T>(-scale * (1 - n.ls) * n.W(t));
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterCrossEntropyKernels(KernelTable& t) {
  t.Add("cross_entropy_log_softmax", "loop_log_softmax", kFloat, LogSoftmax);
  t.Add("cross_entropy_log_softmax_backward", "loop_log_softmax_backward", kFloat,
        LogSoftmaxBackward);
  t.Add("cross_entropy_nll", "loop_nll", kFloat, NllForward);
  t.Add("cross_entropy_nll_backward", "loop_nll_backward", kFloat, NllBackward);
}

}  // namespace tensord::cpu
