// CPU kernels of the optimizer ops (server/ops/optimizers.cc): one pass over the elements
// reads param, grad and state at an index, and writes param and state back. Each element goes
// through the same sequence of roundings as torch.optim's single-tensor step (every scalar is
// cast to the param's dtype, every intermediate is rounded to it), so f64 results agree with
// PyTorch to the last bits and f32 ones to a few ulp. A large update is shared by the intra-op
// threads in blocks (loops.h); an element's roundings do not depend on which thread runs it.
#include <cmath>
#include <type_traits>

#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"
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

// Turns a run-time option into a compile-time one: f(std::true_type) or f(std::false_type). An
// update's loop is instantiated for each combination of its options, so that its body has no
// branch and vectorizes.
template <typename F>
void Specialize(bool option, F&& f) {
  if (option) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

template <typename T>
struct SgdScalars {
  T lr_neg, momentum, one_minus_dampening, wd;
};

// The parameters, gradients and states of one update never overlap (CheckOptimizerAliasing).
template <typename T, bool kMaximize, bool kWd, bool kMomentum, bool kFirst, bool kNesterov>
void SgdBlock(int64_t begin, int64_t end, T* __restrict p, const T* __restrict g, T* __restrict buf,
              const SgdScalars<T> s) {
  for (int64_t i = begin; i < end; ++i) {
    T d = kMaximize ? -g[i] : g[i];
    if constexpr (kWd) d = d + s.wd * p[i];
    if constexpr (kMomentum) {
      // Step 0: torch.optim clones d into the new buffer.
      const T b = kFirst ? d : buf[i] * s.momentum + s.one_minus_dampening * d;
      buf[i] = b;
      d = kNesterov ? d + s.momentum * b : b;
    }
    p[i] = p[i] + s.lr_neg * d;
  }
}

template <typename T>
void SgdLoop(int64_t n, T* p, const T* g, T* buf, bool first_step, const Attrs& a) {
  const SgdScalars<T> s{static_cast<T>(-a.GetFloat("lr")), static_cast<T>(a.GetFloat("momentum")),
                        static_cast<T>(1 - a.GetFloat("dampening")),
                        static_cast<T>(a.GetFloat("weight_decay"))};
  const bool has_momentum = a.GetFloat("momentum") != 0;
  const bool nesterov = a.GetBool("nesterov");
  Specialize(a.GetBool("maximize"), [&](auto maximize) {
    Specialize(a.GetFloat("weight_decay") != 0, [&](auto wd) {
      const auto run = [&](auto momentum, auto first, auto nest) {
        ForBlocks(n, [&](int64_t begin, int64_t end) {
          SgdBlock<T, decltype(maximize)::value, decltype(wd)::value, decltype(momentum)::value,
                   decltype(first)::value, decltype(nest)::value>(begin, end, p, g, buf, s);
        });
      };
      if (!has_momentum) return run(std::false_type{}, std::false_type{}, std::false_type{});
      Specialize(first_step, [&](auto first) {
        Specialize(nesterov, [&](auto nest) { run(std::true_type{}, first, nest); });
      });
    });
  });
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
struct AdamConstants {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, wd, decay, bc2_sqrt, eps, step_size_neg;
};

template <typename T, bool kMaximize, bool kDecoupled, bool kWd, bool kAmsgrad>
void AdamBlock(int64_t begin, int64_t end, T* __restrict p, const T* __restrict g, T* __restrict m,
               T* __restrict v, T* __restrict vmax, const AdamConstants<T> s) {
  for (int64_t i = begin; i < end; ++i) {
    T grad = kMaximize ? -g[i] : g[i];
    T param = p[i];
    if constexpr (kDecoupled) {
      param = param * s.decay;  // AdamW: param.mul_(1 - lr * weight_decay), always
    } else if constexpr (kWd) {
      grad = grad + s.wd * param;  // Adam: grad.add(param, alpha=weight_decay)
    }
    const T mi = m[i] * s.beta1 + s.one_minus_beta1 * grad;
    const T vi = v[i] * s.beta2 + s.one_minus_beta2 * grad * grad;
    m[i] = mi;
    v[i] = vi;
    T second = vi;
    if constexpr (kAmsgrad) {
      second = Maximum(vmax[i], vi);
      vmax[i] = second;
    }
    const T denom = std::sqrt(second) / s.bc2_sqrt + s.eps;
    p[i] = param + s.step_size_neg * mi / denom;
  }
}

template <typename T>
void AdamLoop(int64_t n, T* p, const T* g, T* m, T* v, T* vmax, const ops::AdamScalars& s,
              bool decoupled, bool maximize) {
  const AdamConstants<T> k{static_cast<T>(s.beta1),
                           static_cast<T>(1 - s.beta1),
                           static_cast<T>(s.beta2),
                           static_cast<T>(1 - s.beta2),
                           static_cast<T>(s.weight_decay),
                           static_cast<T>(1 - s.lr * s.weight_decay),
                           static_cast<T>(s.bias_correction2_sqrt),
                           static_cast<T>(s.eps),
                           static_cast<T>(-s.step_size)};
  Specialize(maximize, [&](auto max) {
    Specialize(vmax != nullptr, [&](auto amsgrad) {
      const auto run = [&](auto coupling, auto wd) {
        ForBlocks(n, [&](int64_t begin, int64_t end) {
          AdamBlock<T, decltype(max)::value, decltype(coupling)::value, decltype(wd)::value,
                    decltype(amsgrad)::value>(begin, end, p, g, m, v, vmax, k);
        });
      };
      if (decoupled) return run(std::true_type{}, std::false_type{});
      Specialize(s.weight_decay != 0, [&](auto wd) { run(std::false_type{}, wd); });
    });
  });
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
