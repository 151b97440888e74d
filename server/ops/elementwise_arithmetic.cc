// Elementwise ops: binary arithmetic with broadcasting and type promotion, and where. Unary
// math is in elementwise_unary.cc, comparisons and logical ops in elementwise_compare.cc.
// Gradients of broadcast inputs are summed back to the input shape by the autodiff engine, so
// rules here work at the broadcast shape.
#include <cmath>

#include "absl/strings/str_join.h"
#include "server/ops/elementwise.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace ops {

absl::Status IntegerDivisionByZero(const std::string& op, const std::string& rounding_mode) {
  if (op == "div") {
    return Error(Reason::kInvalidRequest, "div: integer division by zero",
                 {{"op", "div"}, {"rounding_mode", rounding_mode}});
  }
  return Error(Reason::kInvalidRequest, absl::StrCat(op, ": integer modulo by zero"), {{"op", op}});
}

absl::StatusOr<Shape> BroadcastOpShapes(const std::string& op, absl::Span<const TensorMeta> in) {
  Shape out;
  for (const TensorMeta& m : in) {
    auto s = BroadcastShapes(out, m.shape);
    if (!s.ok()) {
      std::vector<std::string> shapes;
      for (const TensorMeta& t : in) shapes.push_back(ShapeToString(t.shape));
      return Error(
          Reason::kShapeMismatch,
          absl::StrCat(op, ": shapes ", absl::StrJoin(shapes, " and "), " are not broadcastable"),
          {{"op", op}, {"shape", absl::StrJoin(shapes, ";")}});
    }
    out = *std::move(s);
  }
  return out;
}

InferFn BroadcastInfer(const std::string& op, std::optional<DType> out) {
  return [op, out](absl::Span<const TensorMeta> in,
                   const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(Shape s, BroadcastOpShapes(op, in));
    return std::vector<TensorMeta>{{out.value_or(in.back().dtype), s}};
  };
}

OpDef BinaryDef(const std::string& name, DTypeSet dtypes, Marking marking, BackwardFn backward,
                std::optional<DType> out) {
  OpDef d = NewOp(name, "elementwise", {"input", "other"}, dtypes, marking);
  d.promote_from = 0;
  d.infer = BroadcastInfer(name, out);
  d.backward = std::move(backward);
  return d;
}

InferFn FloatFunctionInfer() {
  return [](absl::Span<const TensorMeta> in,
            const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    return std::vector<TensorMeta>{{IsFloat(in[0].dtype) ? in[0].dtype : DType::kF32, in[0].shape}};
  };
}

}  // namespace ops

namespace {
using namespace ops;
using Grads = absl::StatusOr<std::vector<Tensor>>;

// PyTorch refuses a fractional alpha for integer tensors and any alpha but 1 (True) for bools.
InferFn AlphaInfer(const std::string& op) {
  InferFn broadcast = BroadcastInfer(op);
  return [op, broadcast](absl::Span<const TensorMeta> in,
                         const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    const double alpha = a.GetFloat("alpha");
    const DType d = in[0].dtype;
    if ((IsBool(d) && alpha != 1.0) || (IsInt(d) && alpha != std::trunc(alpha))) {
      return WithMetadata(AttrError(op, "alpha",
                                    absl::StrCat("must be ", IsBool(d) ? "1" : "an integer",
                                                 " for ", DTypeName(d), " inputs, got ", alpha)),
                          {{"value", absl::StrCat(alpha)}, {"dtype", std::string(DTypeName(d))}});
    }
    return broadcast(in, a);
  };
}

Grads AddSubBackward(const GradContext& g, double sign) {
  GradOps o(g.run);
  const double alpha = sign * g.attrs.GetFloat("alpha");
  std::vector<Tensor> out = {g.grad_outputs[0], g.grad_outputs[0]};
  if (g.needs_input_grad[1] && alpha != 1.0) {
    ASSIGN_OR_RETURN(out[1], o.Scale(g.grad_outputs[0], alpha));
  }
  return out;
}

Grads MulBackward(const GradContext& g) {
  GradOps o(g.run);
  std::vector<Tensor> out(2);
  if (g.needs_input_grad[0]) {
    ASSIGN_OR_RETURN(out[0], o.Mul(g.grad_outputs[0], g.inputs[1]));
  }
  if (g.needs_input_grad[1]) {
    ASSIGN_OR_RETURN(out[1], o.Mul(g.grad_outputs[0], g.inputs[0]));
  }
  return out;
}

// Rounded quotients are piecewise constant: zero gradient, as in PyTorch.
Grads DivBackward(const GradContext& g) {
  GradOps o(g.run);
  const Tensor& go = g.grad_outputs[0];
  const Tensor& a = g.inputs[0];
  const Tensor& b = g.inputs[1];
  const bool rounded = g.attrs.Has("rounding_mode");
  std::vector<Tensor> out(2);
  for (int i = 0; i < 2; ++i) {
    if (g.needs_input_grad[i] && rounded) {
      ASSIGN_OR_RETURN(out[i], o.ZerosLike(go));
    }
  }
  if (rounded) return out;
  if (g.needs_input_grad[0]) {
    ASSIGN_OR_RETURN(out[0], o.Div(go, b));
  }
  if (g.needs_input_grad[1]) {
    // -g * a / b^2, from the inputs so that BALANCED need not recompute the quotient.
    ASSIGN_OR_RETURN(Tensor num, o.Mul(go, a));
    ASSIGN_OR_RETURN(Tensor den, o.Mul(b, b));
    ASSIGN_OR_RETURN(Tensor q, o.Div(num, den));
    ASSIGN_OR_RETURN(out[1], o.Neg(q));
  }
  return out;
}

// PyTorch's pow_backward_self / pow_backward_exponent: the base gradient is 0 where the
// exponent is 0, the exponent gradient 0 where base == 0 and exponent >= 0.
Grads PowBackward(const GradContext& g) {
  GradOps o(g.run);
  const Tensor& go = g.grad_outputs[0];
  const Tensor& x = g.inputs[0];
  const Tensor& e = g.inputs[1];
  const Tensor zero = GradOps::Scalar(0.0);
  std::vector<Tensor> out(2);
  if (g.needs_input_grad[0]) {
    ASSIGN_OR_RETURN(Tensor em1, o.Sub(e, GradOps::Scalar(1.0)));
    ASSIGN_OR_RETURN(Tensor p, o.Op(opname::pow, {x, em1}));
    ASSIGN_OR_RETURN(Tensor d, o.Mul(p, e));
    ASSIGN_OR_RETURN(d, o.Mul(go, d));
    ASSIGN_OR_RETURN(Tensor e0, o.Op(opname::eq, {e, zero}));
    ASSIGN_OR_RETURN(out[0], o.Op(opname::where, {e0, zero, d}));
  }
  if (g.needs_input_grad[1]) {
    ASSIGN_OR_RETURN(Tensor lx, o.Op(opname::log, {x}));
    ASSIGN_OR_RETURN(Tensor d, o.Mul(g.outputs[0], lx));
    ASSIGN_OR_RETURN(d, o.Mul(go, d));
    ASSIGN_OR_RETURN(Tensor x0, o.Op(opname::eq, {x, zero}));
    ASSIGN_OR_RETURN(Tensor enn, o.Op(opname::ge, {e, zero}));
    ASSIGN_OR_RETURN(Tensor both, o.Op(opname::logical_and, {x0, enn}));
    ASSIGN_OR_RETURN(out[1], o.Op(opname::where, {both, zero, d}));
  }
  return out;
}

// As PyTorch: ties split the gradient evenly, the losing side gets none, and with a NaN
// operand (every comparison false) both sides get the full gradient.
BackwardFn ExtremumBackward(bool is_max) {
  return [is_max](const GradContext& g) -> Grads {
    GradOps o(g.run);
    const Tensor& go = g.grad_outputs[0];
    const Tensor& a = g.inputs[0];
    const Tensor& b = g.inputs[1];
    const Tensor zero = GradOps::Scalar(0.0);
    ASSIGN_OR_RETURN(Tensor tie, o.Op(opname::eq, {a, b}));
    ASSIGN_OR_RETURN(Tensor half, o.Scale(go, 0.5));
    ASSIGN_OR_RETURN(Tensor shared, o.Op(opname::where, {tie, half, go}));
    std::vector<Tensor> out(2);
    if (g.needs_input_grad[0]) {
      ASSIGN_OR_RETURN(Tensor loses, o.Op(is_max ? opname::lt : opname::gt, {a, b}));
      ASSIGN_OR_RETURN(out[0], o.Op(opname::where, {loses, zero, shared}));
    }
    if (g.needs_input_grad[1]) {
      ASSIGN_OR_RETURN(Tensor loses, o.Op(is_max ? opname::gt : opname::lt, {a, b}));
      ASSIGN_OR_RETURN(out[1], o.Op(opname::where, {loses, zero, shared}));
    }
    return out;
  };
}

Grads WhereBackward(const GradContext& g) {
  GradOps o(g.run);
  const Tensor& cond = g.inputs[0];
  const Tensor& go = g.grad_outputs[0];
  const Tensor zero = GradOps::Scalar(0.0);
  std::vector<Tensor> out(3);
  if (g.needs_input_grad[1]) {
    ASSIGN_OR_RETURN(out[1], o.Op(opname::where, {cond, go, zero}));
  }
  if (g.needs_input_grad[2]) {
    ASSIGN_OR_RETURN(out[2], o.Op(opname::where, {cond, zero, go}));
  }
  return out;
}

OpDef Div() {
  OpDef div = BinaryDef("div", kAll, Marking::kDifferentiable, DivBackward);
  div.attrs = {{"rounding_mode", AttrType::kString, {}, false, {"trunc", "floor"}}};
  div.infer = [](absl::Span<const TensorMeta> in,
                 const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    const DType d = in[0].dtype;
    const bool rounded = a.Has("rounding_mode");
    if (rounded && IsBool(d)) {
      return WithMetadata(
          DtypeError("div", absl::StrCat("rounding_mode '", a.GetString("rounding_mode"),
                                         "' is not supported for bool inputs")),
          {{"dtype", "bool"}});
    }
    ASSIGN_OR_RETURN(Shape s, BroadcastOpShapes("div", in));
    // True division of integers gives PyTorch's default float dtype.
    return std::vector<TensorMeta>{{rounded || IsFloat(d) ? d : DType::kF32, s}};
  };
  div.integers_to_float = [](const Attrs& a) { return !a.Has("rounding_mode"); };
  return div;
}

OpDef Where() {
  // The table's dtype check looks at input 0, the condition; the value operands (promoted
  // from index 1) may be any dtype, and the shape rule requires a bool condition.
  OpDef where = NewOp("where", "elementwise", {"condition", "input", "other"}, kAll,
                      Marking::kDifferentiable);
  where.promote_from = 1;
  where.infer = [](absl::Span<const TensorMeta> in,
                   const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    if (in[0].dtype != DType::kBool) {
      return WithMetadata(
          DtypeError("where", absl::StrCat("condition must be bool, got ", DTypeName(in[0].dtype))),
          {{"dtype", std::string(DTypeName(in[0].dtype))}, {"input_index", "0"}});
    }
    ASSIGN_OR_RETURN(Shape s, BroadcastOpShapes("where", in));
    return std::vector<TensorMeta>{{in[1].dtype, s}};
  };
  where.backward = WhereBackward;
  return where;
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  OpDef add = BinaryDef("add", kAll, Marking::kDifferentiable,
                        [](const GradContext& g) { return AddSubBackward(g, 1.0); });
  add.attrs = {FloatAttr("alpha", 1.0)};
  add.infer = AlphaInfer("add");
  MustAdd(r, std::move(add));

  OpDef sub = BinaryDef("sub", kFloatInt, Marking::kDifferentiable,
                        [](const GradContext& g) { return AddSubBackward(g, -1.0); });
  sub.attrs = {FloatAttr("alpha", 1.0)};
  sub.infer = AlphaInfer("sub");
  MustAdd(r, std::move(sub));

  MustAdd(r, BinaryDef("mul", kAll, Marking::kDifferentiable, MulBackward));
  MustAdd(r, Div());
  MustAdd(r, BinaryDef("pow", kFloatInt, Marking::kDifferentiable, PowBackward));
  MustAdd(r, BinaryDef("maximum", kAll, Marking::kDifferentiable, ExtremumBackward(true)));
  MustAdd(r, BinaryDef("minimum", kAll, Marking::kDifferentiable, ExtremumBackward(false)));
  MustAdd(r, Where());

  RegisterUnaryMathOps(r);
  RegisterComparisonOps(r);
  RegisterBinaryFunctionOps(r);
  RegisterUnaryTranscendentalOps(r);
}

}  // namespace tensord
