// The elementwise ops a GPU backend generates, as expressions over their operands. One entry
// per op serves every dtype and every dialect: the kernel source around it (kernel_source.h)
// loads the operands in the compute type, evaluates the expression and stores the result.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/core/dtype.h"
#include "server/ops/attrs.h"

namespace tensord::gpu {

// Which dtype an expression computes in.
enum class ComputeIn {
  kOutput,  // operands are converted to the output dtype first (arithmetic, float functions)
  kInput,   // in the first operand's dtype, the result converted to the output's (comparisons,
            // predicates)
};

struct ElementwiseExpr {
  int arity = 1;  // operands a, b, c, d
  // A C expression (valid in OpenCL C and CUDA C) over `a`, `b`, `c`, `d` of type `T` (the
  // compute type) and the float attributes `s0`, `s1`, `s2` (see `scalars`).
  std::string expr;
  ComputeIn compute = ComputeIn::kOutput;
  // Attribute values handed to the kernel as s0, s1, s2 (alpha, negative_slope, ...), in the
  // compute type.
  std::vector<double> scalars;
  // Functions the expression calls, rendered before the kernel; they may compute in double, so
  // a device without fp64 does not run the expression.
  std::string helpers;
};

// The expressions of one op, for every dtype and attribute.
struct ElementwiseForm;
// The form of the op named `op`, or null when the generator has none (looked up once, when a
// backend builds its kernel table).
const ElementwiseForm* FindElementwiseForm(const std::string& op);
// The expression of a call computing in `compute` with these attributes, or nullopt when the
// form has none for it (an op the generator runs on floats only).
std::optional<ElementwiseExpr> ExprOf(const ElementwiseForm& form, const Attrs& attrs,
                                      DType compute);

// What a call of the form computes: its expression and compute dtype (the output's, or for
// comparisons and predicates the first input's), or nullopt when the form has none for it.
struct ElementwisePlan {
  ElementwiseExpr expr;
  DType compute;
};
std::optional<ElementwisePlan> PlanElementwise(const ElementwiseForm& form, const Attrs& attrs,
                                               DType first_input, DType output);

}  // namespace tensord::gpu
