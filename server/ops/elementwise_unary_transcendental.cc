// Transcendental unary math: logarithms and exponentials, trigonometric and hyperbolic functions
// and their inverses, sinc, erf, erfc, erfinv. All are PyTorch floating-point functions (integer
// and bool inputs give f32); gradients follow PyTorch's derivatives.yaml formulas, written in other
// ops.
#include <cmath>

#include "server/ops/elementwise.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {
using namespace ops;
using In = const Tensor&;
using Out = absl::StatusOr<Tensor>;

constexpr double kPi = 3.14159265358979323846;
constexpr double kLn2 = 0.69314718055994530942;
constexpr double kLn10 = 2.30258509299404568402;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // 2/sqrt(pi)
constexpr double kSqrtPiOverTwo = 0.88622692545275801365;  // sqrt(pi)/2

template <typename Rule>
void Add(OpRegistry& r, const std::string& name, Rule rule) {
  OpDef d = DifferentiableUnary(name, kAll, FloatFunctionInfer(), rule);
  MustAdd(r, std::move(d));
}

// g * s / sqrt(sign * x^2 + c): the shared shape of the inverse trigonometric gradients.
Out OverSqrtOfSquare(GradOps& o, In x, In go, double sign, double c, double s) {
  ASSIGN_OR_RETURN(Tensor x2, o.Mul(x, x));
  if (sign < 0) {
    ASSIGN_OR_RETURN(x2, o.Neg(x2));
  }
  ASSIGN_OR_RETURN(Tensor arg, o.Add(x2, GradOps::Scalar(c)));
  ASSIGN_OR_RETURN(Tensor r, o.Op(opname::rsqrt, {arg}));
  ASSIGN_OR_RETURN(Tensor d, o.Mul(go, r));
  return s == 1.0 ? d : o.Scale(d, s);
}

// g * s * exp(sign * v^2): the erf family.
Out TimesExpOfSquare(GradOps& o, In v, In go, double sign, double s) {
  ASSIGN_OR_RETURN(Tensor v2, o.Mul(v, v));
  if (sign < 0) {
    ASSIGN_OR_RETURN(v2, o.Neg(v2));
  }
  ASSIGN_OR_RETURN(Tensor e, o.Op(opname::exp, {v2}));
  ASSIGN_OR_RETURN(Tensor d, o.Mul(go, e));
  return o.Scale(d, s);
}

}  // namespace

void RegisterUnaryTranscendentalOps(OpRegistry& r) {
  Add(r, "log1p", [](GradOps& o, In x, In, In go) -> Out {
    ASSIGN_OR_RETURN(Tensor x1, o.Add(x, GradOps::Scalar(1.0)));
    return o.Div(go, x1);
  });
  Add(r, "expm1", [](GradOps& o, In, In y, In go) -> Out {
    ASSIGN_OR_RETURN(Tensor y1, o.Add(y, GradOps::Scalar(1.0)));
    return o.Mul(go, y1);
  });
  Add(r, "log2", [](GradOps& o, In x, In, In go) -> Out {
    ASSIGN_OR_RETURN(Tensor d, o.Div(go, x));
    return o.Scale(d, 1.0 / kLn2);
  });
  Add(r, "log10", [](GradOps& o, In x, In, In go) -> Out {
    ASSIGN_OR_RETURN(Tensor d, o.Div(go, x));
    return o.Scale(d, 1.0 / kLn10);
  });
  Add(r, "exp2", [](GradOps& o, In, In y, In go) -> Out {
    ASSIGN_OR_RETURN(Tensor d, o.Mul(go, y));
    return o.Scale(d, kLn2);
  });

  Add(r, "sin", [](GradOps& o, In x, In, In go) -> Out {
    ASSIGN_OR_RETURN(Tensor c, o.Op(opname::cos, {x}));
    return o.Mul(go, c);
  });
  Add(r, "cos", [](GradOps& o, In x, In, In go) -> Out {
    ASSIGN_OR_RETURN(Tensor s, o.Op(opname::sin, {x}));
    ASSIGN_OR_RETURN(Tensor d, o.Mul(go, s));
    return o.Neg(d);
  });
  // tan' = 1 + tan^2, from the output.
  Add(r, "tan", [](GradOps& o, In, In y, In go) -> Out {
    ASSIGN_OR_RETURN(Tensor y2, o.Mul(y, y));
    ASSIGN_OR_RETURN(Tensor d, o.Add(y2, GradOps::Scalar(1.0)));
    return o.Mul(go, d);
  });
  // sinc' = (cos(pi x) - sinc(x)) / x, and 0 at x = 0 (where sinc is flat), as in PyTorch.
  Add(r, "sinc", [](GradOps& o, In x, In y, In go) -> Out {
    ASSIGN_OR_RETURN(Tensor pi_x, o.Scale(x, kPi));
    ASSIGN_OR_RETURN(Tensor c, o.Op(opname::cos, {pi_x}));
    ASSIGN_OR_RETURN(Tensor num, o.Sub(c, y));
    ASSIGN_OR_RETURN(Tensor d, o.Div(num, x));
    ASSIGN_OR_RETURN(Tensor at_zero, o.Op(opname::eq, {x, GradOps::Scalar(0.0)}));
    ASSIGN_OR_RETURN(Tensor slope, o.Op(opname::where, {at_zero, GradOps::Scalar(0.0), d}));
    return o.Mul(go, slope);
  });
  Add(r, "asin",
      [](GradOps& o, In x, In, In go) -> Out { return OverSqrtOfSquare(o, x, go, -1, 1, 1); });
  Add(r, "acos",
      [](GradOps& o, In x, In, In go) -> Out { return OverSqrtOfSquare(o, x, go, -1, 1, -1); });
  Add(r, "atan", [](GradOps& o, In x, In, In go) -> Out {
    ASSIGN_OR_RETURN(Tensor x2, o.Mul(x, x));
    ASSIGN_OR_RETURN(Tensor den, o.Add(x2, GradOps::Scalar(1.0)));
    return o.Div(go, den);
  });

  Add(r, "sinh", [](GradOps& o, In x, In, In go) -> Out {
    ASSIGN_OR_RETURN(Tensor c, o.Op(opname::cosh, {x}));
    return o.Mul(go, c);
  });
  Add(r, "cosh", [](GradOps& o, In x, In, In go) -> Out {
    ASSIGN_OR_RETURN(Tensor s, o.Op(opname::sinh, {x}));
    return o.Mul(go, s);
  });
  Add(r, "asinh",
      [](GradOps& o, In x, In, In go) -> Out { return OverSqrtOfSquare(o, x, go, 1, 1, 1); });
  Add(r, "acosh",
      [](GradOps& o, In x, In, In go) -> Out { return OverSqrtOfSquare(o, x, go, 1, -1, 1); });
  Add(r, "atanh", [](GradOps& o, In x, In, In go) -> Out {
    ASSIGN_OR_RETURN(Tensor x2, o.Mul(x, x));
    ASSIGN_OR_RETURN(Tensor den, o.Sub(GradOps::Scalar(1.0), x2));
    return o.Div(go, den);
  });

  Add(r, "erf", [](GradOps& o, In x, In, In go) -> Out {
    return TimesExpOfSquare(o, x, go, -1, kTwoOverSqrtPi);
  });
  Add(r, "erfc", [](GradOps& o, In x, In, In go) -> Out {
    return TimesExpOfSquare(o, x, go, -1, -kTwoOverSqrtPi);
  });
  // erfinv'(x) = sqrt(pi)/2 * exp(erfinv(x)^2), from the output.
  Add(r, "erfinv", [](GradOps& o, In, In y, In go) -> Out {
    return TimesExpOfSquare(o, y, go, 1, kSqrtPiOverTwo);
  });
}

}  // namespace tensord
