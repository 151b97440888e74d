// Registration of the elementwise kernel files; RegisterElementwiseKernels (kernel_table.h)
// calls these after its own binary arithmetic kernels.
#pragma once

#include "server/backends/cpu/kernel_table.h"

namespace tensord::cpu {

void RegisterUnaryMathKernels(KernelTable& t);   // elementwise_unary_kernels.cc
void RegisterComparisonKernels(KernelTable& t);  // elementwise_compare_kernels.cc

}  // namespace tensord::cpu
