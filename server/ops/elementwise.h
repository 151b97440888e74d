// Shared pieces of the elementwise op families (elementwise_*.cc, activation_*.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/ops/op_def.h"
#include "server/ops/op_helpers.h"
#include "server/ops/registry.h"

namespace tensord {

// Registered by RegisterElementwiseOps after the binary arithmetic ops.
void RegisterUnaryMathOps(OpRegistry& r);   // elementwise_unary.cc
void RegisterComparisonOps(OpRegistry& r);  // elementwise_compare.cc
// remainder, fmod, atan2, hypot, bitwise ops, lerp; registered by RegisterElementwiseOps.
void RegisterBinaryFunctionOps(OpRegistry& r);  // elementwise_binary_functions.cc
// log1p ... erfinv; registered by RegisterElementwiseOps.
void RegisterUnaryTranscendentalOps(OpRegistry& r);  // elementwise_unary_transcendental.cc
// softmax, log_softmax, softmin, prelu, glu; registered by RegisterActivationOps.
void RegisterActivationDimOps(OpRegistry& r);  // activation_dim.cc

namespace ops {

// INVALID_REQUEST for an integer div with a rounding mode (`rounding_mode` non-empty) or an
// integer fmod/remainder whose divisor holds a zero: PyTorch's ZeroDivisionError. Every backend
// checks the whole divisor before it computes.
absl::Status IntegerDivisionByZero(const std::string& op, const std::string& rounding_mode);

// Broadcast of every input's shape; SHAPE_MISMATCH names the op and all the shapes.
absl::StatusOr<Shape> BroadcastOpShapes(const std::string& op, absl::Span<const TensorMeta> in);
// Shape rule: broadcast of the inputs, dtype `out` or else that of the last input (inputs were
// promoted to one dtype).
InferFn BroadcastInfer(const std::string& op, std::optional<DType> out = std::nullopt);
// Shape rule of PyTorch's floating-point functions (exp, sigmoid, ...): float inputs keep their
// dtype, integer and bool inputs give f32.
InferFn FloatFunctionInfer();

// A two-input elementwise op entry: the operands broadcast and are promoted to their PyTorch
// result type; the output has the broadcast shape and dtype `out`, or else the promoted one.
OpDef BinaryDef(const std::string& name, DTypeSet dtypes, Marking marking, BackwardFn backward,
                std::optional<DType> out = std::nullopt);

// A single-input elementwise op entry.
OpDef UnaryDef(const std::string& name, DTypeSet dtypes, Marking marking, InferFn infer = SameAs(0),
               BackwardFn backward = nullptr);

// A differentiable unary op whose gradient is `rule(ops, input, output, grad_output)`, written
// in other ops so that every backend that has them can differentiate it.
template <typename Rule>
OpDef DifferentiableUnary(const std::string& name, DTypeSet dtypes, InferFn infer, Rule rule) {
  return UnaryDef(name, dtypes, Marking::kDifferentiable, std::move(infer),
                  [rule](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
                    GradOps o(g.run);
                    ASSIGN_OR_RETURN(Tensor gx,
                                     rule(o, g.inputs[0], g.outputs[0], g.grad_outputs[0]));
                    return std::vector<Tensor>{gx};
                  });
}

// Shape rule of softmax-like ops: an in-range `dim` (BAD_ATTRIBUTE otherwise) and an optional
// float `dtype` the result is computed in.
InferFn SoftmaxInfer(const std::string& name);

// Which tensor a fused activation backward reads next to the incoming gradient.
enum class Saved { kInput, kOutput };

// Registers the pointwise activation `name` and its internal `<name>_backward` op, which takes
// (grad_output, saved) and the forward's attributes.
void AddPointwise(OpRegistry& r, const std::string& name, DTypeSet dtypes, InferFn infer,
                  Saved saved, std::vector<AttrSpec> attrs = {});

}  // namespace ops
}  // namespace tensord
