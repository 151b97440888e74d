// The kernel of a fused_elementwise expression (server/ops/elementwise_fusion.h): each step is
// its op's own expression (elementwise_exprs.h) wrapped in a function of its own and called in
// the order of the postfix steps, so the values between steps stay in registers and each is
// what the step's own kernel would have stored.
#pragma once

#include <string>
#include <vector>

#include "server/backends/gpu/codegen/elementwise_exprs.h"
#include "server/backends/gpu/codegen/kernel_source.h"

namespace tensord::gpu {

struct FusedStep {
  int input = -1;        // >= 0: pushes input `input`; otherwise applies `expr`
  ElementwiseExpr expr;  // arity operands from the stack, its scalars as kernel arguments
};

// Kernel arguments: out, the inputs (a number operand by value), the geometry (the coalesced
// output shape, then each input's strides), n, rank, then each step's scalars in step order.
struct FusedElementwiseKernel {
  std::string name;
  std::vector<FusedStep> steps;
  std::vector<DType> inputs;   // storage dtypes
  std::vector<bool> by_value;  // parallel to inputs
  DType dtype = DType::kF32;   // the output's, and what every step computes in
};
std::string RenderFusedElementwise(const Dialect& dialect, const FusedElementwiseKernel& k);

}  // namespace tensord::gpu
