// Binary elementwise functions: remainder and fmod (Python- and C-style modulo), atan2 and
// hypot, the bitwise ops, and lerp. Operands broadcast and promote like add; gradients are
// written at the broadcast shape and summed back by the engine.
#include <cmath>

#include "server/ops/elementwise.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {
using namespace ops;
using Grads = absl::StatusOr<std::vector<Tensor>>;

// d/da (a mod b) = 1 and d/db = -q with q the rounded quotient the modulo subtracts: floored
// for remainder, truncated for fmod (PyTorch's formulas).
BackwardFn ModuloBackward(const char* rounding_mode) {
  return [rounding_mode](const GradContext& g) -> Grads {
    GradOps o(g.run);
    const Tensor& go = g.grad_outputs[0];
    std::vector<Tensor> out(2);
    if (g.needs_input_grad[0]) out[0] = go;
    if (g.needs_input_grad[1]) {
      ASSIGN_OR_RETURN(Tensor q, o.Op(opname::div, {g.inputs[0], g.inputs[1]},
                                      {{"rounding_mode", std::string(rounding_mode)}}));
      ASSIGN_OR_RETURN(Tensor gq, o.Mul(go, q));
      ASSIGN_OR_RETURN(out[1], o.Neg(gq));
    }
    return out;
  };
}

// atan2(a, b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2).
Grads Atan2Backward(const GradContext& g) {
  GradOps o(g.run);
  const Tensor& a = g.inputs[0];
  const Tensor& b = g.inputs[1];
  ASSIGN_OR_RETURN(Tensor a2, o.Mul(a, a));
  ASSIGN_OR_RETURN(Tensor b2, o.Mul(b, b));
  ASSIGN_OR_RETURN(Tensor den, o.Add(a2, b2));
  ASSIGN_OR_RETURN(Tensor scaled, o.Div(g.grad_outputs[0], den));
  std::vector<Tensor> out(2);
  if (g.needs_input_grad[0]) {
    ASSIGN_OR_RETURN(out[0], o.Mul(scaled, b));
  }
  if (g.needs_input_grad[1]) {
    ASSIGN_OR_RETURN(Tensor t, o.Mul(scaled, a));
    ASSIGN_OR_RETURN(out[1], o.Neg(t));
  }
  return out;
}

// hypot(a, b) = r: d/da = a / r, d/db = b / r (NaN at the origin, as in PyTorch).
Grads HypotBackward(const GradContext& g) {
  GradOps o(g.run);
  ASSIGN_OR_RETURN(Tensor scaled, o.Div(g.grad_outputs[0], g.outputs[0]));
  std::vector<Tensor> out(2);
  for (int i = 0; i < 2; ++i) {
    if (g.needs_input_grad[i]) {
      ASSIGN_OR_RETURN(out[i], o.Mul(scaled, g.inputs[i]));
    }
  }
  return out;
}

// Output dtype of PyTorch's binary float functions (atan2): promoted float operands keep
// their dtype, integer and bool operands give f32.
InferFn FloatBinaryInfer(const std::string& op) {
  return [op](absl::Span<const TensorMeta> in,
              const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(Shape s, BroadcastOpShapes(op, in));
    return std::vector<TensorMeta>{{IsFloat(in[0].dtype) ? in[0].dtype : DType::kF32, s}};
  };
}

// lerp(input, end, weight) = input + weight * (end - input).
Grads LerpBackward(const GradContext& g) {
  GradOps o(g.run);
  const Tensor& go = g.grad_outputs[0];
  const Tensor& w = g.inputs[2];
  std::vector<Tensor> out(3);
  if (g.needs_input_grad[0]) {
    ASSIGN_OR_RETURN(Tensor one_minus_w, o.Sub(GradOps::Scalar(1.0), w));
    ASSIGN_OR_RETURN(out[0], o.Mul(go, one_minus_w));
  }
  if (g.needs_input_grad[1]) {
    ASSIGN_OR_RETURN(out[1], o.Mul(go, w));
  }
  if (g.needs_input_grad[2]) {
    ASSIGN_OR_RETURN(Tensor diff, o.Sub(g.inputs[1], g.inputs[0]));
    ASSIGN_OR_RETURN(out[2], o.Mul(go, diff));
  }
  return out;
}

// As torch.lerp, input and end must share a float dtype and a weight tensor with dimensions
// must have it too (no promotion). A 0-d weight, the form a Python number takes, may be of any
// dtype: the kernel converts it.
OpDef Lerp() {
  OpDef d =
      NewOp("lerp", "elementwise", {"input", "end", "weight"}, kFloat, Marking::kDifferentiable);
  d.infer = [](absl::Span<const TensorMeta> in,
               const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    const DType want = in[0].dtype;
    for (int i = 1; i < 3; ++i) {
      const bool number = i == 2 && in[i].shape.empty();
      if (in[i].dtype == want || number) continue;
      const char* name = i == 1 ? "end" : "weight";
      return WithMetadata(
          DtypeError("lerp", absl::StrCat("expected dtype ", DTypeName(want), " for '", name,
                                          "' (the dtype of input), got ", DTypeName(in[i].dtype))),
          {{"dtype", std::string(DTypeName(in[i].dtype))}, {"input_index", absl::StrCat(i)}});
    }
    ASSIGN_OR_RETURN(Shape s, BroadcastOpShapes("lerp", in));
    return std::vector<TensorMeta>{{want, s}};
  };
  d.backward = LerpBackward;
  d.doc = "input + weight * (end - input); weight is a tensor or a number";
  return d;
}

}  // namespace

void RegisterBinaryFunctionOps(OpRegistry& r) {
  MustAdd(r, BinaryDef("remainder", kFloatInt, Marking::kDifferentiable, ModuloBackward("floor")));
  MustAdd(r, BinaryDef("fmod", kFloatInt, Marking::kDifferentiable, ModuloBackward("trunc")));
  OpDef atan2 = BinaryDef("atan2", kAll, Marking::kDifferentiable, Atan2Backward);
  atan2.infer = FloatBinaryInfer("atan2");
  atan2.integers_to_float = [](const Attrs&) { return true; };
  MustAdd(r, std::move(atan2));
  MustAdd(r, BinaryDef("hypot", kFloat, Marking::kDifferentiable, HypotBackward));
  for (const char* name : {"bitwise_and", "bitwise_or", "bitwise_xor"}) {
    MustAdd(r, BinaryDef(name, kIntBool, Marking::kNonDifferentiable, nullptr));
  }
  OpDef bitwise_not = UnaryDef("bitwise_not", kIntBool, Marking::kNonDifferentiable);
  MustAdd(r, std::move(bitwise_not));
  MustAdd(r, Lerp());
}

}  // namespace tensord
