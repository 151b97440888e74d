#include "server/backends/gpu/codegen/elementwise_exprs.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>

namespace tensord::gpu {
namespace {

// One op's expressions: for float compute dtypes and for integer (and bool) ones; an empty
// expression means the generator does not run that kind. Integer division by zero and the
// other data-dependent errors of the CPU loops cannot be reported from a kernel, so the ops
// that have them run on integers on the CPU only.
struct Entry {
  int arity;
  std::string float_expr;
  std::string int_expr;
  ComputeIn compute = ComputeIn::kOutput;
  std::vector<std::string> scalars = {};
  // Below, what sets a few ops apart (written once here, so nothing asks for an op's name).
  // The integer form runs for i32 and i64 only (bool never gets here: the ops promote it).
  bool int_i32_i64_only = false;
  // Functions the integer form calls.
  const char* int_helpers = "";
  // The expression on bool (~ is logical negation there, as PyTorch's bitwise_not).
  const char* bool_expr = "";
  // The first scalar on bool is value != 0 (a cast of 0.5 to int would give false).
  bool bool_scalar_is_nonzero = false;
  // div's rounding_mode attribute picks trunc or floor division.
  bool rounding_modes = false;
};

// a - trunc(a / b) * b, adjusted to the divisor's sign: Python's modulo (PyTorch remainder).
constexpr char kRemainder[] =
    "(fmod(a, b) != (T)0 && ((b < (T)0) != (fmod(a, b) < (T)0))) ? fmod(a, b) + b : fmod(a, b)";
constexpr char kIntRemainder[] =
    "b == (T)-1 ? (T)0 : ((a % b != 0 && ((b < 0) != (a % b < 0))) ? (T)((UT)(a % b) + (UT)b) : "
    "a % b)";
// Integer division without a trap: lowest() / -1 wraps to lowest() as in PyTorch.
constexpr char kIntTruncDiv[] = "b == (T)-1 ? (T)((UT)0 - (UT)a) : a / b";
constexpr char kIntFloorDiv[] =
    "b == (T)-1 ? (T)((UT)0 - (UT)a) : (T)(a / b - ((a % b != 0 && ((a < 0) != (b < 0))) ? 1 : 0))";
// PyTorch's powi in wrapping 64-bit arithmetic (an i32 result is its low half): negative
// exponents give 0 except for bases 1 and -1.
constexpr char kIntPow[] = R"(
long td_ipow(long base, long e) {
  if (e < 0) {
    if (base == 1) return 1;
    if (base == -1) return e % 2 != 0 ? -1 : 1;
    return 0;
  }
  ulong result = 1, b = (ulong)base;
  while (e != 0) {
    if (e & 1) result *= b;
    e >>= 1;
    b *= b;
  }
  return (long)result;
}
)";
constexpr char kSigmoid[] = "((T)1 / ((T)1 + exp(-a)))";
// selu's scale, and scale * alpha as the double product the CPU kernel rounds: literals the
// compute type rounds once.
#define SELU_SCALE "1.0507009873554804934193349852946"
#define SELU_SCALE_ALPHA "1.7580993408473766"
constexpr char kSelu[] = "a > (T)0 ? (T)" SELU_SCALE " * a : (T)" SELU_SCALE_ALPHA " * expm1(a)";
constexpr char kSeluBackward[] =
    "b > (T)0 ? a * (T)" SELU_SCALE " : a * (T)" SELU_SCALE_ALPHA " * exp(b)";
// min(max(x, 0), 6) as std::max/std::min evaluate it: NaN stays NaN.
#define MAX0(x) "((" x ") < (T)0 ? (T)0 : (" x "))"
#define MIN6(x) "((T)6 < " x " ? (T)6 : " x ")"
// softshrink and hardshrink share their gradient: zero on [-lambd, lambd].
constexpr char kShrinkBackward[] = "(b >= -(T)s0 && b <= (T)s0) ? (T)0 : a";

const std::map<std::string, Entry>& Table() {
  static const auto* table = new std::map<std::string, Entry>{
      // Arithmetic (the dispatcher has promoted both operands to the output dtype).
      {"add", {2, "a + (T)s0 * b", "a + (T)s0 * b", ComputeIn::kOutput, {"alpha"}}},
      {"sub", {2, "a - (T)s0 * b", "a - (T)s0 * b", ComputeIn::kOutput, {"alpha"}}},
      {"mul", {2, "a * b", "a * b"}},
      // Integer operands divide with a rounding mode only (true division gives f32).
      // Integer division and modulo: the divisor was checked for zeros first.
      {"div", {2, "a / b", "a / b", ComputeIn::kOutput, {}, true, "", "", false, true}},
      {"maximum", {2, "isnan(a) ? a : isnan(b) ? b : a > b ? a : b", "a > b ? a : b"}},
      {"minimum", {2, "isnan(a) ? a : isnan(b) ? b : a < b ? a : b", "a < b ? a : b"}},
      {"pow",
       {2, "pow(a, b)", "(T)td_ipow((long)a, (long)b)", ComputeIn::kOutput, {}, true, kIntPow}},
      {"atan2", {2, "atan2(a, b)", ""}},
      {"hypot", {2, "hypot(a, b)", ""}},
      // Integer modulo: the divisor was checked for zeros first; -1 is answered without
      // dividing (lowest() % -1 traps).
      {"fmod", {2, "fmod(a, b)", "b == (T)-1 ? (T)0 : a % b", ComputeIn::kOutput, {}, true}},
      {"remainder", {2, kRemainder, kIntRemainder, ComputeIn::kOutput, {}, true}},
      {"bitwise_and", {2, "", "a & b"}},
      {"bitwise_or", {2, "", "a | b"}},
      {"bitwise_xor", {2, "", "a ^ b"}},
      {"bitwise_not", {1, "", "~a", ComputeIn::kOutput, {}, false, "", "a == 0"}},
      // Comparisons and logic compute in the operands' dtype and store bool.
      {"eq", {2, "a == b", "a == b", ComputeIn::kInput}},
      {"ne", {2, "a != b", "a != b", ComputeIn::kInput}},
      {"lt", {2, "a < b", "a < b", ComputeIn::kInput}},
      {"le", {2, "a <= b", "a <= b", ComputeIn::kInput}},
      {"gt", {2, "a > b", "a > b", ComputeIn::kInput}},
      {"ge", {2, "a >= b", "a >= b", ComputeIn::kInput}},
      {"logical_and", {2, "a != (T)0 && b != (T)0", "a != 0 && b != 0", ComputeIn::kInput}},
      {"logical_or", {2, "a != (T)0 || b != (T)0", "a != 0 || b != 0", ComputeIn::kInput}},
      {"logical_xor", {2, "(a != (T)0) != (b != (T)0)", "(a != 0) != (b != 0)", ComputeIn::kInput}},
      {"logical_not", {1, "a == (T)0", "a == 0", ComputeIn::kInput}},
      {"isnan", {1, "isnan(a)", "0", ComputeIn::kInput}},
      {"isinf", {1, "isinf(a)", "0", ComputeIn::kInput}},
      {"isfinite", {1, "isfinite(a)", "1", ComputeIn::kInput}},
      {"where", {3, "a != (T)0 ? b : c", "a != 0 ? b : c"}},
      // PyTorch's lerp: the formula switches at |weight| = 0.5 so that weight 1 gives `end`.
      {"lerp", {3, "fabs(c) < (T)0.5 ? a + c * (b - a) : b - (b - a) * ((T)1 - c)", ""}},
      {"masked_fill",
       {2,
        "b != (T)0 ? (T)s0 : a",
        "b != 0 ? (T)s0 : a",
        ComputeIn::kOutput,
        {"value"},
        false,
        "",
        "",
        true}},
      // Unary arithmetic and rounding.
      {"neg", {1, "-a", "-a"}},
      {"abs", {1, "fabs(a)", "a < 0 ? -a : a"}},
      {"square", {1, "a * a", "a * a"}},
      {"reciprocal", {1, "(T)1 / a", ""}},
      // PyTorch's sign: NaN and -0.0 give 0.
      {"sign", {1, "(T)(((T)0 < a) - (a < (T)0))", "(T)((0 < a) - (a < 0))"}},
      {"floor", {1, "floor(a)", "a"}},
      {"ceil", {1, "ceil(a)", "a"}},
      {"trunc", {1, "trunc(a)", "a"}},
      {"frac", {1, "a - trunc(a)", ""}},
      // Float functions (integer inputs were given a float output dtype by the op's rule).
      {"exp", {1, "exp(a)", ""}},
      {"exp2", {1, "exp2(a)", ""}},
      {"expm1", {1, "expm1(a)", ""}},
      {"log", {1, "log(a)", ""}},
      {"log2", {1, "log2(a)", ""}},
      {"log10", {1, "log10(a)", ""}},
      {"log1p", {1, "log1p(a)", ""}},
      {"sqrt", {1, "sqrt(a)", ""}},
      {"rsqrt", {1, "(T)1 / sqrt(a)", ""}},
      {"sin", {1, "sin(a)", ""}},
      {"cos", {1, "cos(a)", ""}},
      {"tan", {1, "tan(a)", ""}},
      {"asin", {1, "asin(a)", ""}},
      {"acos", {1, "acos(a)", ""}},
      {"atan", {1, "atan(a)", ""}},
      {"sinh", {1, "sinh(a)", ""}},
      {"cosh", {1, "cosh(a)", ""}},
      {"asinh", {1, "asinh(a)", ""}},
      {"acosh", {1, "acosh(a)", ""}},
      {"atanh", {1, "atanh(a)", ""}},
      {"erf", {1, "erf(a)", ""}},
      {"erfc", {1, "erfc(a)", ""}},
      {"sinc",
       {1,
        "a == (T)0 ? (T)1 : sin((T)3.14159265358979323846 * a) / "
        "((T)3.14159265358979323846 * a)",
        ""}},
      // Activations and the internal backward ops of their rules (gradient first).
      {"relu", {1, "a < (T)0 ? (T)0 : a", "a < 0 ? 0 : a"}},
      {"relu_backward", {2, "b <= (T)0 ? (T)0 : a", ""}},
      {"sigmoid", {1, kSigmoid, ""}},
      {"sigmoid_backward", {2, "a * ((T)1 - b) * b", ""}},
      {"tanh", {1, "tanh(a)", ""}},
      {"tanh_backward", {2, "a * ((T)1 - b * b)", ""}},
      {"silu", {1, "a / ((T)1 + exp(-a))", ""}},
      {"silu_backward",
       {2, "a * ((T)1 / ((T)1 + exp(-b))) * ((T)1 + b * ((T)1 - (T)1 / ((T)1 + exp(-b))))", ""}},
      {"softplus",
       {1,
        "a * (T)s0 > (T)s1 ? a : log1p(exp(a * (T)s0)) / (T)s0",
        "",
        ComputeIn::kOutput,
        {"beta", "threshold"}}},
      {"softplus_backward",
       {2,
        "b * (T)s0 > (T)s1 ? a : a * exp(b * (T)s0) / (exp(b * (T)s0) + (T)1)",
        "",
        ComputeIn::kOutput,
        {"beta", "threshold"}}},
      {"leaky_relu", {1, "a > (T)0 ? a : a * (T)s0", "", ComputeIn::kOutput, {"negative_slope"}}},
      {"leaky_relu_backward",
       {2, "b > (T)0 ? a : a * (T)s0", "", ComputeIn::kOutput, {"negative_slope"}}},
      {"elu", {1, "a > (T)0 ? a : (T)s0 * expm1(a)", "", ComputeIn::kOutput, {"alpha"}}},
      {"elu_backward", {2, "b > (T)0 ? a : a * (T)s0 * exp(b)", "", ComputeIn::kOutput, {"alpha"}}},
      {"softsign", {1, "a / ((T)1 + fabs(a))", ""}},
      {"softsign_backward", {2, "a / (((T)1 + fabs(b)) * ((T)1 + fabs(b)))", ""}},
      {"tanhshrink", {1, "a - tanh(a)", ""}},
      {"tanhshrink_backward", {2, "a * tanh(b) * tanh(b)", ""}},
      // The piecewise activations take the branch the CPU kernels take at every kink (after
      // PyTorch's), and comparisons written so that NaN falls through to the input.
      {"relu6", {1, "a < (T)0 ? (T)0 : (a > (T)6 ? (T)6 : a)", ""}},
      {"relu6_backward", {2, "(b <= (T)0 || b >= (T)6) ? (T)0 : a", ""}},
      {"hardtanh",
       {1,
        "a < (T)s0 ? (T)s0 : (a > (T)s1 ? (T)s1 : a)",
        "",
        ComputeIn::kOutput,
        {"min_val", "max_val"}}},
      {"hardtanh_backward",
       {2,
        "(b <= (T)s0 || b >= (T)s1) ? (T)0 : a",
        "",
        ComputeIn::kOutput,
        {"min_val", "max_val"}}},
      {"selu", {1, kSelu, ""}},
      {"selu_backward", {2, kSeluBackward, ""}},
      // 1/alpha as the CPU rounds it: from double once.
      {"celu",
       {1,
        "a > (T)0 ? a : (T)s0 * expm1(a * (T)s1)",
        "",
        ComputeIn::kOutput,
        {"alpha", "1/alpha"}}},
      {"celu_backward",
       {2, "b > (T)0 ? a : a * exp(b * (T)s0)", "", ComputeIn::kOutput, {"1/alpha"}}},
      {"hardsigmoid", {1, "(" MIN6(MAX0("a + (T)3")) ") / (T)6", ""}},
      {"hardsigmoid_backward", {2, "(b > (T)-3 && b < (T)3) ? a / (T)6 : (T)0", ""}},
      {"hardswish", {1, "a * " MIN6(MAX0("a + (T)3")) " / (T)6", ""}},
      {"hardswish_backward",
       {2, "b < (T)-3 ? (T)0 : (b <= (T)3 ? a * (b / (T)3 + (T)0.5) : a)", ""}},
      {"softshrink",
       {1,
        "a > (T)s0 ? a - (T)s0 : (a < -(T)s0 ? a + (T)s0 : a * (T)0)",
        "",
        ComputeIn::kOutput,
        {"lambd"}}},
      {"softshrink_backward", {2, kShrinkBackward, "", ComputeIn::kOutput, {"lambd"}}},
      {"hardshrink",
       {1, "(a >= -(T)s0 && a <= (T)s0) ? (T)0 : a", "", ComputeIn::kOutput, {"lambd"}}},
      {"hardshrink_backward", {2, kShrinkBackward, "", ComputeIn::kOutput, {"lambd"}}},
      {"threshold", {1, "a <= (T)s0 ? (T)s1 : a", "", ComputeIn::kOutput, {"threshold", "value"}}},
      {"threshold_backward", {2, "b <= (T)s0 ? (T)0 : a", "", ComputeIn::kOutput, {"threshold"}}},
      // mish(x) = x tanh(softplus(x)), softplus without a threshold as on the CPU.
      {"mish", {1, "a * tanh(log1p(exp(a)))", ""}},
      {"mish_backward",
       {2,
        "a * (tanh(log1p(exp(b))) + b * ((T)1 / ((T)1 + exp(-b))) * "
        "((T)1 - tanh(log1p(exp(b))) * tanh(log1p(exp(b)))))",
        ""}},
      // min(x, 0) - log1p(exp(-|x|)), with std::min's NaN rule.
      {"logsigmoid", {1, "((T)0 < a ? (T)0 : a) - log1p(exp(-fabs(a)))", ""}},
      {"logsigmoid_backward",
       {2, "b < (T)0 ? a / ((T)1 + exp(-fabs(b))) : a * exp(-fabs(b)) / ((T)1 + exp(-fabs(b)))",
        ""}},
  };
  return *table;
}

constexpr char kGeluErf[] = "(T)0.5 * a * ((T)1 + erf(a * (T)0.70710678118654752440))";
constexpr char kGeluErfBackward[] =
    "a * ((T)0.5 * ((T)1 + erf(b * (T)0.70710678118654752440)) + "
    "b * (T)0.39894228040143267794 * exp((T)-0.5 * b * b))";
// tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
constexpr char kGeluTanh[] =
    "(T)0.5 * a * ((T)1 + tanh((T)0.79788456080286535588 * (a + (T)0.044715 * a * a * a)))";
constexpr char kGeluTanhBackward[] =
    "a * ((T)0.5 * ((T)1 + tanh((T)0.79788456080286535588 * (b + (T)0.044715 * b * b * b))) + "
    "(T)0.5 * b * ((T)1 - tanh((T)0.79788456080286535588 * (b + (T)0.044715 * b * b * b)) * "
    "tanh((T)0.79788456080286535588 * (b + (T)0.044715 * b * b * b))) * "
    "(T)0.79788456080286535588 * ((T)1 + (T)0.134145 * b * b))";

// The CPU's inverse error function in double (elementwise_unary_transcendental_kernels.cc):
// Giles' single-precision approximation as a start, then Newton steps, on log(erfc(x)) =
// log(1 - |y|) beyond |y| = 0.5, where erfc keeps its relative precision.
constexpr char kErfInv[] = R"(
double td_erfinv(const double y) {
  if (!(y > -1 && y < 1)) {
    if (y == 1) return INFINITY;
    if (y == -1) return -INFINITY;
    return NAN;
  }
  if (y == 0) return y;
  const double a = fabs(y);
  double w = -log((1.0 - a) * (1.0 + a));
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
    w = sqrt(w) - 3.0;
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
  const double log_tail = log(1.0 - a);
  for (int step = 0; step < 8; ++step) {
    const double density = 1.12837916709551257390 * exp(-x * x);
    double dx;
    if (a <= 0.5) {
      dx = (erf(x) - a) / density;
    } else {
      const double tail = erfc(x);
      dx = (log_tail - log(tail)) * tail / density;
    }
    x -= dx;
    if (fabs(dx) <= 1e-15 * x) break;
  }
  return copysign(x, y);
}
)";

// clamp and round read attributes that change the expression, not only its scalars.
// An integer clamp's bound as the CPU's SaturateCast makes it: the dtype's range caps it.
// nullopt for a bound at or above the dtype's max, which clamps nothing (and i64's max has no
// exact double to carry it).
std::optional<double> IntegerBound(double v, DType compute) {
  const double lowest = compute == DType::kI32 ? -2147483648.0 : -9223372036854775808.0;
  const double max = compute == DType::kI32 ? 2147483647.0 : 9223372036854775808.0;
  if (!(v > lowest)) return lowest;
  if (!(v < max)) return compute == DType::kI32 ? std::optional<double>(max) : std::nullopt;
  return std::trunc(v);
}

// min(max(x, lo), hi) as std::min/std::max evaluate it, so NaN stays NaN; an absent bound
// does not clamp.
std::optional<ElementwiseExpr> Clamp(const Attrs& attrs, DType compute) {
  ElementwiseExpr e;
  const double inf = std::numeric_limits<double>::infinity();
  const double lo = attrs.Has("min") ? attrs.GetFloat("min") : -inf;
  const double hi = attrs.Has("max") ? attrs.GetFloat("max") : inf;
  e.expr = "s1 < (a < s0 ? s0 : a) ? s1 : (a < s0 ? s0 : a)";
  if (IsFloat(compute)) {
    e.scalars = {lo, hi};
    return e;
  }
  if (compute != DType::kI32 && compute != DType::kI64) return std::nullopt;
  const std::optional<double> l = IntegerBound(lo, compute), h = IntegerBound(hi, compute);
  // A lower bound at or above i64's max lifts every value to that max, then the upper bound
  // applies.
  if (!l) {
    e.expr = h ? "s0" : "(T)0x7fffffffffffffffL";
    if (h) e.scalars = {*h};
    return e;
  }
  e.scalars = {*l};
  if (h) {
    e.scalars.push_back(*h);
  } else {
    e.expr = "(a < s0 ? s0 : a)";
  }
  return e;
}

// round(x, decimals): half to even at 10^-decimals.
std::optional<ElementwiseExpr> Round(const Attrs& attrs, DType compute) {
  ElementwiseExpr e;
  const int64_t decimals = attrs.GetInt("decimals");
  if (!IsFloat(compute)) {
    e.expr = "a";
  } else if (decimals == 0) {
    e.expr = "rint(a)";
  } else {
    e.scalars = {std::pow(10.0, static_cast<double>(std::abs(decimals)))};
    e.expr = decimals > 0 ? "rint(a * s0) / s0" : "rint(a / s0) * s0";
  }
  return e;
}

template <bool kBackward>
std::optional<ElementwiseExpr> Gelu(const Attrs& attrs, DType compute) {
  if (!IsFloat(compute)) return std::nullopt;
  const bool tanh = attrs.GetString("approximate") == "tanh";
  ElementwiseExpr e;
  e.arity = kBackward ? 2 : 1;
  e.expr =
      kBackward ? (tanh ? kGeluTanhBackward : kGeluErfBackward) : (tanh ? kGeluTanh : kGeluErf);
  return e;
}

std::optional<ElementwiseExpr> ErfInv(const Attrs&, DType compute) {
  if (!IsFloat(compute)) return std::nullopt;
  ElementwiseExpr e;
  e.expr = "(T)td_erfinv((double)a)";
  e.helpers = kErfInv;
  return e;
}

// The ops whose attributes change the expression, not only its scalars.
using FormFn = std::optional<ElementwiseExpr> (*)(const Attrs& attrs, DType compute);
const std::map<std::string, FormFn>& FormTable() {
  static const auto* t = new std::map<std::string, FormFn>{{"clamp", Clamp},
                                                           {"round", Round},
                                                           {"gelu", Gelu<false>},
                                                           {"gelu_backward", Gelu<true>},
                                                           {"erfinv", ErfInv}};
  return *t;
}

std::optional<ElementwiseExpr> FromEntry(const Entry& entry, const Attrs& attrs, DType compute) {
  const bool is_float = IsFloat(compute);
  ElementwiseExpr e;
  e.arity = entry.arity;
  e.compute = entry.compute;
  e.expr = is_float ? entry.float_expr : entry.int_expr;
  if (e.expr.empty()) return std::nullopt;
  if (compute == DType::kBool && entry.bool_scalar_is_nonzero) {
    e.scalars = {attrs.GetFloat(entry.scalars[0]) != 0 ? 1.0 : 0.0};
    return e;
  }
  if (compute == DType::kBool && *entry.bool_expr) e.expr = entry.bool_expr;
  if (entry.rounding_modes && attrs.Has("rounding_mode")) {
    const std::string mode = attrs.GetString("rounding_mode");
    if (is_float) {
      e.expr = mode == "trunc" ? "trunc(a / b)" : "floor(a / b)";
    } else {
      e.expr = mode == "trunc" ? kIntTruncDiv : kIntFloorDiv;
    }
  }
  if (!is_float && entry.int_i32_i64_only && compute != DType::kI32 && compute != DType::kI64) {
    return std::nullopt;
  }
  if (!is_float) e.helpers = entry.int_helpers;
  for (const std::string& name : entry.scalars) {
    // "1/x": the reciprocal of attribute x, computed in double.
    const bool reciprocal = name.rfind("1/", 0) == 0;
    const double v = attrs.GetFloat(reciprocal ? name.substr(2) : name);
    e.scalars.push_back(reciprocal ? 1.0 / v : v);
  }
  return e;
}

}  // namespace

// An op's expressions: a table entry, or a function of the attributes.
struct ElementwiseForm {
  const Entry* entry = nullptr;
  FormFn form = nullptr;
};

const ElementwiseForm* FindElementwiseForm(const std::string& op) {
  static const auto* forms = [] {
    auto* m = new std::map<std::string, ElementwiseForm>();
    for (const auto& [name, entry] : Table()) (*m)[name].entry = &entry;
    for (const auto& [name, fn] : FormTable()) (*m)[name] = ElementwiseForm{nullptr, fn};
    return m;
  }();
  auto it = forms->find(op);
  return it == forms->end() ? nullptr : &it->second;
}

std::optional<ElementwiseExpr> ExprOf(const ElementwiseForm& form, const Attrs& attrs,
                                      DType compute) {
  return form.form ? form.form(attrs, compute) : FromEntry(*form.entry, attrs, compute);
}

std::optional<ElementwisePlan> PlanElementwise(const ElementwiseForm& form, const Attrs& attrs,
                                               DType first_input, DType output) {
  for (DType compute : {output, first_input}) {
    std::optional<ElementwiseExpr> e = ExprOf(form, attrs, compute);
    if (!e) continue;
    const DType want = e->compute == ComputeIn::kOutput ? output : first_input;
    if (want != compute) continue;
    return ElementwisePlan{*e, compute};
  }
  return std::nullopt;
}

}  // namespace tensord::gpu
