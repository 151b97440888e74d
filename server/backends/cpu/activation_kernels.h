// Shared pieces of the activation kernel files (activation_kernels.cc,
// activation_tier2_kernels.cc).
#pragma once

#include "server/backends/cpu/elementwise_dispatch.h"
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"

namespace tensord::cpu {

// Registered by RegisterActivationKernels after the tier-1 activation kernels.
void RegisterActivationTier2Kernels(KernelTable& t);  // activation_tier2_kernels.cc
// prelu and glu, which work along a dim; registered by RegisterActivationTier2Kernels.
void RegisterActivationDimKernels(KernelTable& t);  // activation_dim_kernels.cc

// Runs the functor returned by make(T{}) over input 0 into output 0, both of float dtype T.
template <typename Make>
absl::Status FloatUnary(KernelCall& c, Make make) {
  VisitDType<kF>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    UnaryLoop<T, T>(c.inputs[0], c.outputs[0], make(tag));
  });
  return absl::OkStatus();
}

// Backward ops: out = f(grad_output, saved), both of the output's float dtype.
template <typename Make>
absl::Status FloatBinary(KernelCall& c, Make make) {
  VisitDType<kF>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    BinaryLoop<T, T, T>(c.inputs[0], c.inputs[1], c.outputs[0], make(tag));
  });
  return absl::OkStatus();
}

}  // namespace tensord::cpu
