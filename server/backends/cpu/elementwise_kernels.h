// Registration of the elementwise kernel files, and the kernel bodies they share.
// RegisterElementwiseKernels (kernel_table.h) calls the Register* functions after its own
// binary arithmetic kernels.
#pragma once

#include <algorithm>
#include <type_traits>

#include "server/backends/cpu/elementwise_dispatch.h"
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"

namespace tensord::cpu {

void RegisterUnaryMathKernels(KernelTable& t);       // elementwise_unary_kernels.cc
void RegisterComparisonKernels(KernelTable& t);      // elementwise_compare_kernels.cc
void RegisterBinaryFunctionKernels(KernelTable& t);  // elementwise_binary_function_kernels.cc
// elementwise_unary_transcendental_kernels.cc
void RegisterUnaryTranscendentalKernels(KernelTable& t);
void RegisterFusedElementwiseKernels(KernelTable& t);  // fused_elementwise_kernels.cc

// Output dtype equals input dtype: out = Op{}(x) over the dtypes in kSet.
template <uint32_t kSet, typename Op>
absl::Status SameDTypeKernel(KernelCall& c) {
  VisitDType<kSet>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    UnaryLoop<T, T>(c.inputs[0], c.outputs[0], Op{});
  });
  return absl::OkStatus();
}

// Two operands of one dtype in kSet (the dispatcher promoted them), broadcast: out = Op{}(a, b)
// in Op's result type (the operands' dtype, or bool for comparisons).
template <uint32_t kSet, typename Op>
absl::Status SameDTypeBinaryKernel(KernelCall& c) {
  VisitDType<kSet>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    BinaryLoop<T, T, decltype(Op{}(T{}, T{}))>(c.inputs[0], c.inputs[1], c.outputs[0], Op{});
  });
  return absl::OkStatus();
}

// Floating-point functions: integer and bool inputs compute in f32, as PyTorch promotes them.
template <typename Op>
absl::Status FloatFunctionKernel(KernelCall& c) {
  VisitDType<kFIB>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      UnaryLoop<T, T>(c.inputs[0], c.outputs[0], Op{});
    } else {
      UnaryLoop<T, float>(c.inputs[0], c.outputs[0],
                          [](T v) { return Op{}(static_cast<float>(v)); });
    }
  });
  return absl::OkStatus();
}

// Whether any element of `t` (of C++ type T) is zero: integer division and modulo check their
// divisors before the loop, which would otherwise trap.
template <typename T>
bool AnyZero(const Tensor& t) {
  const T* p = t.data<T>();
  return std::any_of(p, p + t.numel(), [](T v) { return v == 0; });
}

}  // namespace tensord::cpu
