// Pieces of the neural-network kernels shared between the loop kernels and the oneDNN ones.
#pragma once

#include <cstdint>

#include "server/backends/cpu/kernel_table.h"

namespace tensord::cpu {

// Loop kernels of the family, one registration per file.
void RegisterConvKernels(KernelTable& t);  // nn_conv_kernels.cc
void RegisterPoolKernels(KernelTable& t);  // nn_pool_kernels.cc

// Loop kernels the oneDNN ones hand the calls to that they cannot reproduce exactly (empty
// tensors, NaN inputs of max pooling, max pooling's return_indices, PyTorch's ceil_mode
// divisor of avg_pool2d, divisor_override).
absl::Status LoopLayerNorm(KernelCall& c);
absl::Status LoopLayerNormBackward(KernelCall& c);
// Any 2-d pool (max or avg, with its windows by the call's op) and its _backward.
absl::Status LoopPool2d(KernelCall& c, bool max);
absl::Status LoopPool2dBackward(KernelCall& c, bool max);

// The indices output of a max pool called with return_indices (its second output), or null.
inline int64_t* PoolIndices(KernelCall& c) {
  return c.outputs.size() > 1 ? c.outputs[1].data<int64_t>() : nullptr;
}

// Row statistics of layer_norm: mean and biased variance, accumulated in double (two passes).
template <typename T>
void RowMoments(const T* x, int64_t n, double* mean, double* var) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  const double mu = n > 0 ? s / n : 0.0;
  double q = 0;
  for (int64_t i = 0; i < n; ++i) q += (x[i] - mu) * (x[i] - mu);
  *mean = mu;
  *var = n > 0 ? q / n : 0.0;
}

}  // namespace tensord::cpu
