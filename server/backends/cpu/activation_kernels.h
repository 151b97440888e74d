// Shared pieces of the activation kernel files (activation_pointwise_kernels.cc,
// activation_piecewise_kernels.cc, activation_dim_kernels.cc).
#pragma once

#include <string>

#include "server/backends/cpu/elementwise_dispatch.h"
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"

namespace tensord::cpu {

// Registered by RegisterActivationKernels (activation_pointwise_kernels.cc).
void RegisterActivationPiecewiseKernels(KernelTable& t);  // activation_piecewise_kernels.cc
void RegisterActivationDimKernels(KernelTable& t);        // activation_dim_kernels.cc

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

// Registers `op` and `op`_backward from two functor makers.
template <typename Forward, typename Backward>
void AddPair(KernelTable& t, const std::string& op, Forward forward, Backward backward) {
  t.Add(op, "loop_" + op, kFloat, [forward](KernelCall& c) { return FloatUnary(c, forward); });
  t.Add(op + "_backward", "loop_" + op + "_backward", kFloat,
        [backward](KernelCall& c) { return FloatBinary(c, backward); });
}

}  // namespace tensord::cpu
