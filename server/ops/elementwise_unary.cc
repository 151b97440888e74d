// Unary elementwise math: arithmetic, PyTorch's floating-point functions (integer inputs give
// f32), rounding (zero gradient), clamp and the elementwise predicates.
#include <cmath>

#include "server/ops/elementwise.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace ops {

OpDef UnaryDef(const std::string& name, DTypeSet dtypes, Marking marking, InferFn infer,
               BackwardFn backward) {
  OpDef d;
  d.name = name;
  d.category = "elementwise";
  d.input_names = {"input"};
  d.dtypes = dtypes;
  d.marking = marking;
  d.infer = std::move(infer);
  d.backward = std::move(backward);
  return d;
}

}  // namespace ops

namespace {
using namespace ops;
using Grads = absl::StatusOr<std::vector<Tensor>>;

using In = const Tensor&;
using Out = absl::StatusOr<Tensor>;

OpDef Round() {
  OpDef round = UnaryDef("round", kFloatInt, Marking::kZeroGrad);
  round.attrs = {IntAttr("decimals", 0)};
  round.infer = [](absl::Span<const TensorMeta> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    if (!IsFloat(in[0].dtype) && a.GetInt("decimals") != 0) {
      return WithMetadata(AttrError("round", "decimals",
                                    absl::StrCat("must be 0 for ", DTypeName(in[0].dtype),
                                                 " inputs, got ", a.GetInt("decimals"))),
                          {{"value", absl::StrCat(a.GetInt("decimals"))}});
    }
    return std::vector<TensorMeta>{in[0]};
  };
  return round;
}

bool Integral(double v) { return std::isinf(v) || v == std::trunc(v); }

// torch.clamp(input, min, max) with scalar bounds. The gradient passes where
// min <= x <= max (both ends included) and is zero elsewhere, NaN inputs included.
OpDef Clamp() {
  OpDef clamp = UnaryDef("clamp", kFloatInt, Marking::kDifferentiable);
  clamp.attrs = {OptionalFloatAttr("min"), OptionalFloatAttr("max")};
  clamp.infer = [](absl::Span<const TensorMeta> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    if (!a.Has("min") && !a.Has("max")) {
      return AttrError("clamp", "min", "or 'max' must be given (both are absent)");
    }
    DType out = in[0].dtype;
    // A fractional bound promotes an integer input to f32, as a Python float bound does in
    // PyTorch; integral bounds keep the integer dtype.
    auto integral_bound = [&a](const char* name) {
      return !a.Has(name) || Integral(a.GetFloat(name));
    };
    if (IsInt(out) && !(integral_bound("min") && integral_bound("max"))) {
      out = DType::kF32;
    }
    return std::vector<TensorMeta>{{out, in[0].shape}};
  };
  clamp.backward = [](const GradContext& g) -> Grads {
    GradOps o(g.run);
    const Tensor& x = g.inputs[0];
    Tensor inside;
    if (g.attrs.Has("min")) {
      ASSIGN_OR_RETURN(inside, o.Op(opname::ge, {x, GradOps::Scalar(g.attrs.GetFloat("min"))}));
    }
    if (g.attrs.Has("max")) {
      ASSIGN_OR_RETURN(Tensor below,
                       o.Op(opname::le, {x, GradOps::Scalar(g.attrs.GetFloat("max"))}));
      if (inside.defined()) {
        ASSIGN_OR_RETURN(inside, o.Op(opname::logical_and, {inside, below}));
      } else {
        inside = below;
      }
    }
    ASSIGN_OR_RETURN(Tensor gx,
                     o.Op(opname::where, {inside, g.grad_outputs[0], GradOps::Scalar(0.0)}));
    return std::vector<Tensor>{gx};
  };
  return clamp;
}

}  // namespace

void RegisterUnaryMathOps(OpRegistry& r) {
  const InferFn same = SameAs(0);
  const InferFn floating = FloatFunctionInfer();

  MustAdd(r, DifferentiableUnary("neg", kFloatInt, same,
                                 [](GradOps& o, In, In, In go) -> Out { return o.Neg(go); }));
  // d|x| = sign(x): zero at 0, like PyTorch.
  MustAdd(r, DifferentiableUnary("abs", kFloatInt, same, [](GradOps& o, In x, In, In go) -> Out {
            ASSIGN_OR_RETURN(Tensor s, o.Op(opname::sign, {x}));
            return o.Mul(go, s);
          }));
  MustAdd(r, DifferentiableUnary("square", kFloatInt, same, [](GradOps& o, In x, In, In go) -> Out {
            ASSIGN_OR_RETURN(Tensor d, o.Mul(go, x));
            return o.Scale(d, 2.0);
          }));
  MustAdd(r, DifferentiableUnary("exp", kAll, floating,
                                 [](GradOps& o, In, In y, In go) -> Out { return o.Mul(go, y); }));
  MustAdd(r, DifferentiableUnary("log", kAll, floating,
                                 [](GradOps& o, In x, In, In go) -> Out { return o.Div(go, x); }));
  MustAdd(r, DifferentiableUnary("sqrt", kAll, floating, [](GradOps& o, In, In y, In go) -> Out {
            ASSIGN_OR_RETURN(Tensor d, o.Div(go, y));
            return o.Scale(d, 0.5);
          }));
  // d x^(-1/2) = -1/2 x^(-3/2) = -1/2 y^3.
  MustAdd(r, DifferentiableUnary("rsqrt", kAll, floating, [](GradOps& o, In, In y, In go) -> Out {
            ASSIGN_OR_RETURN(Tensor y2, o.Mul(y, y));
            ASSIGN_OR_RETURN(Tensor y3, o.Mul(y2, y));
            ASSIGN_OR_RETURN(Tensor d, o.Mul(go, y3));
            return o.Scale(d, -0.5);
          }));
  MustAdd(r,
          DifferentiableUnary("reciprocal", kAll, floating, [](GradOps& o, In, In y, In go) -> Out {
            ASSIGN_OR_RETURN(Tensor y2, o.Mul(y, y));
            ASSIGN_OR_RETURN(Tensor d, o.Mul(go, y2));
            return o.Neg(d);
          }));
  MustAdd(r, DifferentiableUnary("frac", kFloat, same,
                                 [](GradOps&, In, In, In go) -> Out { return go; }));

  MustAdd(r, UnaryDef("sign", kAll, Marking::kZeroGrad));
  MustAdd(r, UnaryDef("floor", kFloatInt, Marking::kZeroGrad));
  MustAdd(r, UnaryDef("ceil", kFloatInt, Marking::kZeroGrad));
  MustAdd(r, UnaryDef("trunc", kFloatInt, Marking::kZeroGrad));
  MustAdd(r, Round());
  MustAdd(r, Clamp());

  const InferFn to_bool = SameShapeAs(DType::kBool);
  for (const char* name : {"logical_not", "isnan", "isinf", "isfinite"}) {
    MustAdd(r, UnaryDef(name, kAll, Marking::kNonDifferentiable, to_bool));
  }
}

}  // namespace tensord
