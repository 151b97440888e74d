// Loop kernels for the transcendental unary functions (log1p ... erfinv): the C++ standard
// library's functions per element, plus sinc and erfinv, which the standard library lacks.
#include <cmath>
#include <limits>

#include "server/backends/cpu/elementwise_kernels.h"

namespace tensord::cpu {
namespace {

// A functor calling std::NAME; integer inputs reach it already converted to float.
#define TENSORD_STD_FUNCTOR(Struct, name) \
  struct Struct {                         \
    template <typename T>                 \
    T operator()(T x) const {             \
      return std::name(x);                \
    }                                     \
  }
TENSORD_STD_FUNCTOR(Log1pOp, log1p);
TENSORD_STD_FUNCTOR(Expm1Op, expm1);
TENSORD_STD_FUNCTOR(Log2Op, log2);
TENSORD_STD_FUNCTOR(Log10Op, log10);
TENSORD_STD_FUNCTOR(Exp2Op, exp2);
TENSORD_STD_FUNCTOR(SinOp, sin);
TENSORD_STD_FUNCTOR(CosOp, cos);
TENSORD_STD_FUNCTOR(TanOp, tan);
TENSORD_STD_FUNCTOR(AsinOp, asin);
TENSORD_STD_FUNCTOR(AcosOp, acos);
TENSORD_STD_FUNCTOR(AtanOp, atan);
TENSORD_STD_FUNCTOR(SinhOp, sinh);
TENSORD_STD_FUNCTOR(CoshOp, cosh);
TENSORD_STD_FUNCTOR(AsinhOp, asinh);
TENSORD_STD_FUNCTOR(AcoshOp, acosh);
TENSORD_STD_FUNCTOR(AtanhOp, atanh);
TENSORD_STD_FUNCTOR(ErfOp, erf);
TENSORD_STD_FUNCTOR(ErfcOp, erfc);
#undef TENSORD_STD_FUNCTOR

constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

// Inverse error function in double. Giles' single-precision approximation ("Approximating the
// erfinv function", GPU Computing Gems, 2011) gives a start good to about 1e-7 for
// 1 - |y| > 1e-7 and a few percent beyond; Newton steps then converge to double precision.
// Beyond |y| = 0.5 they solve log(erfc(x)) = log(1 - |y|) instead of erf(x) = |y|: 1 - |y| is
// exact there, erfc keeps its relative precision in the tail where erf(x) - |y| would cancel,
// and the logarithm, nearly quadratic in x, keeps Newton fast from a poor start.
double ErfInv(double y) {
  if (!(y > -1 && y < 1)) {
    if (y == 1) return std::numeric_limits<double>::infinity();
    if (y == -1) return -std::numeric_limits<double>::infinity();
    return std::numeric_limits<double>::quiet_NaN();  // NaN or |y| > 1
  }
  if (y == 0) return y;  // keeps the sign of -0.0
  const double a = std::fabs(y);
  double w = -std::log((1.0 - a) * (1.0 + a));
  double p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * a;
  const double log_tail = std::log(1.0 - a);
  // Three steps from the 1e-7 start (the last one confirms convergence), up to seven from the
  // far tail's few-percent start.
  for (int step = 0; step < 8; ++step) {
    const double density = kTwoOverSqrtPi * std::exp(-x * x);
    double dx;
    if (a <= 0.5) {
      dx = (std::erf(x) - a) / density;
    } else {
      const double tail = std::erfc(x);
      dx = (log_tail - std::log(tail)) * tail / density;
    }
    x -= dx;
    if (std::fabs(dx) <= 1e-15 * x) break;
  }
  return std::copysign(x, y);
}

// f32 inputs are refined in double too, so that the result is the correctly rounded float
// in all but rare ties.
struct ErfInvOp {
  template <typename T>
  T operator()(T x) const {
    return static_cast<T>(ErfInv(static_cast<double>(x)));
  }
};

// sin(pi x) / (pi x), 1 at 0. In double for f32 too: near its zeros (the nonzero integers)
// float's pi x would cost most of the result's digits.
struct SincOp {
  template <typename T>
  T operator()(T x) const {
    if (x == T(0)) return T(1);
    const double pi_x = 3.14159265358979323846 * static_cast<double>(x);
    return static_cast<T>(std::sin(pi_x) / pi_x);
  }
};

}  // namespace

void RegisterUnaryTranscendentalKernels(KernelTable& t) {
  t.Add("log1p", "loop_log1p", kAll, FloatFunctionKernel<Log1pOp>);
  t.Add("expm1", "loop_expm1", kAll, FloatFunctionKernel<Expm1Op>);
  t.Add("log2", "loop_log2", kAll, FloatFunctionKernel<Log2Op>);
  t.Add("log10", "loop_log10", kAll, FloatFunctionKernel<Log10Op>);
  t.Add("exp2", "loop_exp2", kAll, FloatFunctionKernel<Exp2Op>);
  t.Add("sin", "loop_sin", kAll, FloatFunctionKernel<SinOp>);
  t.Add("cos", "loop_cos", kAll, FloatFunctionKernel<CosOp>);
  t.Add("tan", "loop_tan", kAll, FloatFunctionKernel<TanOp>);
  t.Add("sinc", "loop_sinc", kAll, FloatFunctionKernel<SincOp>);
  t.Add("asin", "loop_asin", kAll, FloatFunctionKernel<AsinOp>);
  t.Add("acos", "loop_acos", kAll, FloatFunctionKernel<AcosOp>);
  t.Add("atan", "loop_atan", kAll, FloatFunctionKernel<AtanOp>);
  t.Add("sinh", "loop_sinh", kAll, FloatFunctionKernel<SinhOp>);
  t.Add("cosh", "loop_cosh", kAll, FloatFunctionKernel<CoshOp>);
  t.Add("asinh", "loop_asinh", kAll, FloatFunctionKernel<AsinhOp>);
  t.Add("acosh", "loop_acosh", kAll, FloatFunctionKernel<AcoshOp>);
  t.Add("atanh", "loop_atanh", kAll, FloatFunctionKernel<AtanhOp>);
  t.Add("erf", "loop_erf", kAll, FloatFunctionKernel<ErfOp>);
  t.Add("erfc", "loop_erfc", kAll, FloatFunctionKernel<ErfcOp>);
  t.Add("erfinv", "loop_erfinv", kAll, FloatFunctionKernel<ErfInvOp>);
}

}  // namespace tensord::cpu
