// Shared pieces of the elementwise op families (elementwise*.cc, activation.cc).
#pragma once

#include <optional>
#include <string>

#include "server/ops/op_def.h"
#include "server/ops/registry.h"

namespace tensord {

// Registered by RegisterElementwiseOps after the binary arithmetic ops.
void RegisterUnaryMathOps(OpRegistry& r);   // elementwise_unary.cc
void RegisterComparisonOps(OpRegistry& r);  // elementwise_compare.cc

namespace ops {

// Broadcast of every input's shape; SHAPE_MISMATCH names the op and all the shapes.
absl::StatusOr<Shape> BroadcastOpShapes(const std::string& op, absl::Span<const TensorMeta> in);
// Shape rule: broadcast of the inputs, dtype `out` or else that of the last input (inputs were
// promoted to one dtype).
InferFn BroadcastInfer(const std::string& op, std::optional<DType> out = std::nullopt);
// Shape rule of PyTorch's floating-point functions (exp, sigmoid, ...): float inputs keep their
// dtype, integer and bool inputs give f32.
InferFn FloatFunctionInfer();

}  // namespace ops
}  // namespace tensord
