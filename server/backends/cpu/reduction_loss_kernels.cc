// Loop kernels for the elementwise parts of l1_loss, binary_cross_entropy,
// binary_cross_entropy_with_logits, smooth_l1_loss, huber_loss and kl_div, and their gradients.
// Operands share one shape (the ops expand them first), so every loop is flat; arithmetic is in
// double.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/reduction_kernels.h"
#include "server/ops/reduction.h"

namespace tensord::cpu {
namespace {

// Calls f(i, in..., out...) with the i-th values of the inputs (as double) and a reference to
// the i-th element of each output, writing back in the output dtype.
template <typename F>
void Flat(KernelCall& c, F f) {
  TENSORD_DISPATCH_FLOAT(c.outputs[0].dtype(), [&] {
    const int64_t n = c.outputs[0].numel();
    std::vector<const T*> in;
    for (const Tensor& t : c.inputs) in.push_back(t.data<T>());
    std::vector<T*> out;
    for (Tensor& t : c.outputs) out.push_back(t.data<T>());
    double v[4] = {0, 0, 0, 0};
    double r[3] = {0, 0, 0};
    for (int64_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < in.size(); ++k) v[k] = static_cast<double>(in[k][i]);
      f(v, r);
      for (size_t k = 0; k < out.size(); ++k) out[k][i] = static_cast<T>(r[k]);
    }
  });
}

double Sign(double v) { return (v > 0) - (v < 0); }

// log(x) and log(1 - x) clamped at -100 like PyTorch, so a probability of exactly 0 or 1
// gives a finite loss.
double ClampedLog(double v) { return std::max(std::log(v), -100.0); }
double ClampedLog1m(double v) { return std::max(std::log1p(-v), -100.0); }

// log(1 + exp(-x)) without overflow for either sign of x.
double SoftplusNeg(double x) { return std::max(-x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }
double SigmoidNeg(double x) {
  return x >= 0 ? std::exp(-x) / (1 + std::exp(-x)) : 1 / (1 + std::exp(x));
}

absl::Status L1(KernelCall& c) {
  Flat(c, [](const double* v, double* r) { r[0] = std::fabs(v[0] - v[1]); });
  return absl::OkStatus();
}

absl::Status L1Backward(KernelCall& c) {
  Flat(c, [](const double* v, double* r) {
    r[0] = v[0] * Sign(v[1] - v[2]);
    r[1] = -r[0];
  });
  return absl::OkStatus();
}

absl::Status Bce(KernelCall& c) {
  RETURN_IF_ERROR(CheckProbabilities(c.inputs[0]));
  Flat(c, [](const double* v, double* r) {
    const double x = v[0], t = v[1];
    r[0] = -(t * ClampedLog(x) + (1 - t) * ClampedLog1m(x));
  });
  return absl::OkStatus();
}

absl::Status BceBackward(KernelCall& c) {
  Flat(c, [](const double* v, double* r) {
    const double g = v[0], x = v[1], t = v[2];
    // PyTorch's denominator floor keeps x = 0 or 1 finite.
    r[0] = g * (x - t) / std::max((1 - x) * x, 1e-12);
    r[1] = g * (ClampedLog1m(x) - ClampedLog(x));
  });
  return absl::OkStatus();
}

// loss = (1 - t) x + (1 + (pw - 1) t) softplus(-x), pw = 1 without pos_weight.
absl::Status BceLogits(KernelCall& c) {
  const bool has_pw = c.inputs.size() > 2;
  Flat(c, [has_pw](const double* v, double* r) {
    const double x = v[0], t = v[1], pw = has_pw ? v[2] : 1.0;
    r[0] = (1 - t) * x + (1 + (pw - 1) * t) * SoftplusNeg(x);
  });
  return absl::OkStatus();
}

absl::Status BceLogitsBackward(KernelCall& c) {
  const bool has_pw = c.inputs.size() > 3;
  Flat(c, [has_pw](const double* v, double* r) {
    const double g = v[0], x = v[1], t = v[2], pw = has_pw ? v[3] : 1.0;
    const double sp = SoftplusNeg(x);
    r[0] = g * ((1 - t) - (1 + (pw - 1) * t) * SigmoidNeg(x));
    r[1] = g * (-x + (pw - 1) * sp);
    r[2] = g * t * sp;  // pos_weight (only written when present)
  });
  return absl::OkStatus();
}

// smooth_l1 (beta > 0; the op routes beta = 0 to l1): quadratic inside |d| < beta.
absl::Status SmoothL1(KernelCall& c) {
  const double beta = c.attrs.GetFloat("beta");
  Flat(c, [beta](const double* v, double* r) {
    const double z = std::fabs(v[0] - v[1]);
    r[0] = z < beta ? 0.5 * z * z / beta : z - 0.5 * beta;
  });
  return absl::OkStatus();
}

absl::Status SmoothL1Backward(KernelCall& c) {
  const double beta = c.attrs.GetFloat("beta");
  Flat(c, [beta](const double* v, double* r) {
    const double d = v[1] - v[2];
    r[0] = v[0] * (d < -beta ? -1.0 : d > beta ? 1.0 : d / beta);
    r[1] = -r[0];
  });
  return absl::OkStatus();
}

absl::Status Huber(KernelCall& c) {
  const double delta = c.attrs.GetFloat("delta");
  Flat(c, [delta](const double* v, double* r) {
    const double z = std::fabs(v[0] - v[1]);
    r[0] = z < delta ? 0.5 * z * z : delta * (z - 0.5 * delta);
  });
  return absl::OkStatus();
}

absl::Status HuberBackward(KernelCall& c) {
  const double delta = c.attrs.GetFloat("delta");
  Flat(c, [delta](const double* v, double* r) {
    const double d = v[1] - v[2];
    r[0] = v[0] * (d < -delta ? -delta : d > delta ? delta : d);
    r[1] = -r[0];
  });
  return absl::OkStatus();
}

// xlogy(t, t) = t log t, 0 at t = 0 (NaN stays NaN).
double XLogX(double t) { return t == 0 ? 0.0 : t * std::log(t); }

// kl_div pointwise, PyTorch's formulas: exp(t) (t - x) with log targets, else
// xlogy(t, t) - t x.
absl::Status KlDiv(KernelCall& c) {
  const bool log_target = c.attrs.GetBool("log_target");
  Flat(c, [log_target](const double* v, double* r) {
    const double x = v[0], t = v[1];
    r[0] = log_target ? std::exp(t) * (t - x) : XLogX(t) - t * x;
  });
  return absl::OkStatus();
}

// The target gradient without log targets is autograd's through xlogy(t, t): g xlogy(t != 0, t)
// + g t / t - g x, which is NaN at t = 0, as in PyTorch.
absl::Status KlDivBackward(KernelCall& c) {
  const bool log_target = c.attrs.GetBool("log_target");
  Flat(c, [log_target](const double* v, double* r) {
    const double g = v[0], x = v[1], t = v[2];
    if (log_target) {
      const double e = std::exp(t);
      r[0] = -g * e;
      r[1] = g * e * (t - x) + g * e;
    } else {
      r[0] = -g * t;
      r[1] = (t != 0 ? g * std::log(t) : 0.0) + g * t / t - g * x;
    }
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterLossKernels(KernelTable& t) {
  t.Add("l1_loss_elementwise", "loop_l1", kFloat, L1);
  t.Add("l1_loss_elementwise_backward", "loop_l1_backward", kFloat, L1Backward);
  t.Add("binary_cross_entropy_elementwise", "loop_bce", kFloat, Bce);
  t.Add("binary_cross_entropy_elementwise_backward", "loop_bce_backward", kFloat, BceBackward);
  t.Add("binary_cross_entropy_with_logits_elementwise", "loop_bce_logits", kFloat, BceLogits);
  t.Add("binary_cross_entropy_with_logits_elementwise_backward", "loop_bce_logits_backward", kFloat,
        BceLogitsBackward);
  t.Add("smooth_l1_loss_elementwise", "loop_smooth_l1", kFloat, SmoothL1);
  t.Add("smooth_l1_loss_elementwise_backward", "loop_smooth_l1_backward", kFloat, SmoothL1Backward);
  t.Add("huber_loss_elementwise", "loop_huber", kFloat, Huber);
  t.Add("huber_loss_elementwise_backward", "loop_huber_backward", kFloat, HuberBackward);
  t.Add("kl_div_elementwise", "loop_kl_div", kFloat, KlDiv);
  t.Add("kl_div_elementwise_backward", "loop_kl_div_backward", kFloat, KlDivBackward);
}

}  // namespace tensord::cpu
