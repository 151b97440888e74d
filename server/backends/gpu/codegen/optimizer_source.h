// Renders the GPU kernels of the optimizer ops (server/ops/optimizers.cc): one work item per
// element reads param, grad and state and writes param and state back, term for term as the
// CPU kernels (and torch.optim's single-tensor step) compute them. Scalars are kernel
// arguments, computed on the host per step; `flags` selects the variant's terms.
#pragma once

#include <string>

#include "server/backends/gpu/codegen/kernel_source.h"

namespace tensord::gpu {

// sgd flag bits.
inline constexpr int kSgdWeightDecay = 1, kSgdMomentum = 2, kSgdNesterov = 4, kSgdMaximize = 8,
                     kSgdFirstStep = 16;
// adam/adamw flag bits.
inline constexpr int kAdamWeightDecay = 1, kAdamDecoupled = 2, kAdamAmsgrad = 4, kAdamMaximize = 8;

// Kernel arguments: p, g, buf, n (int64), lr_neg, momentum, one_minus_dampening,
// weight_decay (T), flags (int). buf is unread without kSgdMomentum.
std::string RenderSgd(const Dialect& dialect, const std::string& name, DType dtype);
// Kernel arguments: p, g, exp_avg, exp_avg_sq, max_exp_avg_sq, n (int64), beta1,
// one_minus_beta1, beta2, one_minus_beta2, weight_decay, decay (1 - lr * weight_decay),
// bias_correction2_sqrt, eps, step_size_neg (T), flags (int). max_exp_avg_sq is unread
// without kAdamAmsgrad.
std::string RenderAdam(const Dialect& dialect, const std::string& name, DType dtype);

}  // namespace tensord::gpu
