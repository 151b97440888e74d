// CPU kernels of the optimizer ops (server/ops/optimizers.cc): one pass over the elements
// reads param, grad and state at an index, and writes param and state back. Each element goes
// through the same sequence of roundings as torch.optim's single-tensor step (every scalar is
// cast to the param's dtype, every intermediate is rounded to it), so f64 results agree with
// PyTorch to the last bits and f32 ones to a few ulp.
#include <cmath>

#include "server/backends/cpu/kernel_table.h"
#include "server/ops/optimizers.h"

namespace tensord::cpu {
namespace {

// The step counter: read, then incremented in its own dtype (torch's `step_t += 1`).
double ReadStep(const Tensor& step) {
  double v = 0;
  TENSORD_DISPATCH_NUMERIC(step.dtype(), [&] { v = static_cast<double>(*step.data<T>()); });
  return v;
}

void IncrementStep(Tensor& step) {
  TENSORD_DISPATCH_NUMERIC(step.dtype(), [&] { *step.data<T>() += T(1); });
  step.storage()->BumpVersion();
}

// torch.maximum: NaN wins.
template <typename T>
T Maximum(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  return a > b ? a : b;
}

template <typename T>
void SgdLoop(int64_t n, T* p, const T* g, T* buf, bool first_step, const Attrs& a) {
  const T lr_neg = static_cast<T>(-a.GetFloat("lr"));
  const T momentum = static_cast<T>(a.GetFloat("momentum"));
  const T one_minus_dampening = static_cast<T>(1 - a.GetFloat("dampening"));
  const T wd = static_cast<T>(a.GetFloat("weight_decay"));
  const bool has_wd = a.GetFloat("weight_decay") != 0;
  const bool has_momentum = a.GetFloat("momentum") != 0;
  const bool nesterov = a.GetBool("nesterov");
  const bool maximize = a.GetBool("maximize");
  for (int64_t i = 0; i < n; ++i) {
    T d = maximize ? -g[i] : g[i];
    if (has_wd) d = d + wd * p[i];
    if (has_momentum) {
      // Step 0: torch.optim clones d into the new buffer.
      const T b = first_step ? d : buf[i] * momentum + one_minus_dampening * d;
      buf[i] = b;
      d = nesterov ? d + momentum * b : b;
    }
    p[i] = p[i] + lr_neg * d;
  }
}

absl::Status SgdKernel(KernelCall& c) {
  RETURN_IF_ERROR(ops::CheckOptimizerAliasing(c.op, c.inputs));
  Tensor param = c.inputs[0];
  const Tensor& grad = c.inputs[1];
  const bool has_state = c.inputs.size() == 4;
  const bool uses_state = has_state && c.attrs.GetFloat("momentum") != 0;
  const bool first_step = uses_state && ReadStep(c.inputs[3]) == 0;
  TENSORD_DISPATCH_FLOAT(param.dtype(), [&] {
    T* buf = uses_state ? const_cast<Tensor&>(c.inputs[2]).data<T>() : nullptr;
    SgdLoop<T>(param.numel(), param.data<T>(), grad.data<T>(), buf, first_step, c.attrs);
  });
  param.storage()->BumpVersion();
  if (has_state) {
    c.inputs[2].storage()->BumpVersion();
    IncrementStep(const_cast<Tensor&>(c.inputs[3]));
  }
  c.outputs[0] = param;
  return absl::OkStatus();
}

template <typename T>
void AdamLoop(int64_t n, T* p, const T* g, T* m, T* v, T* vmax, const ops::AdamScalars& s,
              bool decoupled, bool maximize) {
  const T beta1 = static_cast<T>(s.beta1), one_minus_beta1 = static_cast<T>(1 - s.beta1);
  const T beta2 = static_cast<T>(s.beta2), one_minus_beta2 = static_cast<T>(1 - s.beta2);
  const T wd = static_cast<T>(s.weight_decay);
  const T decay = static_cast<T>(1 - s.lr * s.weight_decay);
  const T bc2_sqrt = static_cast<T>(s.bias_correction2_sqrt);
  const T eps = static_cast<T>(s.eps);
  const T step_size_neg = static_cast<T>(-s.step_size);
  const bool has_wd = s.weight_decay != 0;
  for (int64_t i = 0; i < n; ++i) {
    T grad = maximize ? -g[i] : g[i];
    T param = p[i];
    if (decoupled) {
      param = param * decay;  // AdamW: param.mul_(1 - lr * weight_decay), always
    } else if (has_wd) {
      grad = grad + wd * param;  // Adam: grad.add(param, alpha=weight_decay)
    }
    const T mi = m[i] * beta1 + one_minus_beta1 * grad;
    const T vi = v[i] * beta2 + one_minus_beta2 * grad * grad;
    m[i] = mi;
    v[i] = vi;
    T second = vi;
    if (vmax != nullptr) {
      second = Maximum(vmax[i], vi);
      vmax[i] = second;
    }
    const T denom = std::sqrt(second) / bc2_sqrt + eps;
    p[i] = param + step_size_neg * mi / denom;
  }
}

KernelFn AdamKernel(bool decoupled) {
  return [decoupled](KernelCall& c) -> absl::Status {
    RETURN_IF_ERROR(ops::CheckOptimizerAliasing(c.op, c.inputs));
    auto in = [&](int i) -> Tensor& { return const_cast<Tensor&>(c.inputs[i]); };
    Tensor param = in(0);
    const bool amsgrad = c.inputs.size() == 6;
    IncrementStep(in(4));
    const ops::AdamScalars s = ops::AdamStepScalars(c.attrs, ReadStep(in(4)));
    TENSORD_DISPATCH_FLOAT(param.dtype(), [&] {
      AdamLoop<T>(param.numel(), param.data<T>(), in(1).data<T>(), in(2).data<T>(), in(3).data<T>(),
                  amsgrad ? in(5).data<T>() : nullptr, s, decoupled, c.attrs.GetBool("maximize"));
    });
    for (int i : {0, 2, 3, 5}) {
      if (i < static_cast<int>(c.inputs.size())) in(i).storage()->BumpVersion();
    }
    c.outputs[0] = param;
    return absl::OkStatus();
  };
}

}  // namespace

void RegisterOptimizerKernels(KernelTable& t) {
  t.Add("sgd", "loop_sgd", kFloat, SgdKernel);
  t.Add("adam", "loop_adam", kFloat, AdamKernel(false));
  t.Add("adamw", "loop_adamw", kFloat, AdamKernel(true));
}

}  // namespace tensord::cpu
