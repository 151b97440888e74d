#include "server/backends/gpu/codegen/loss_exprs.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tensord::gpu {
namespace {

// A double literal that reads back exactly.
std::string Literal(double v) { return absl::StrFormat("%.17g", v); }

// The class weight of class `k`: table 0, or 1 without weights.
std::string Weight(bool weighted, const std::string& k) {
  return weighted ? absl::StrCat("A0(", k, ")") : "1.0";
}

}  // namespace

GroupPlan NllLossPlan(const Attrs& a, int64_t rank, bool weighted) {
  const double ls = a.GetFloat("label_smoothing");
  GroupPlan plan;
  plan.walked = {0};
  plan.groups = {1};
  if (weighted) plan.tables = {2};
  plan.dims = {rank == 1 ? 0 : 1};
  plan.compute = DType::kF64;
  // PyTorch's label smoothing: (1 - ls) * nll + ls / C * (-sum_c w_c logp_c).
  plan.body = absl::StrCat("const I64 t = (I64)g0; WIDE l = 0; if (t != (I64)",
                           a.GetInt("ignore_index"), ") { EACH(if (j == t) l = -(1 - ", Literal(ls),
                           ") * ", Weight(weighted, "j"), " * (WIDE)X0(off);) ");
  if (ls > 0) {
    absl::StrAppend(&plan.body, "WIDE smooth = 0; EACH(smooth -= ", Weight(weighted, "j"),
                    " * (WIDE)X0(off);) l += ", Literal(ls), " / (WIDE)n_red * smooth; ");
  }
  // Every item of a work group has the same target: all or none reach GROUP_SUM.
  absl::StrAppend(&plan.body, "GROUP_SUM(l); } OUT(l);");
  plan.cooperative = true;
  return plan;
}

GroupPlan NllBackwardPlan(const Attrs& a, int64_t rank, bool weighted) {
  const double ls = a.GetFloat("label_smoothing");
  const bool per_sample = a.GetString("reduction") == "none";
  GroupPlan plan;
  plan.walked = {1};
  plan.groups = {2};
  if (per_sample) plan.groups.push_back(0);
  if (weighted) plan.tables = {3};
  plan.dims = {rank == 1 ? 0 : 1};
  plan.compute = DType::kF64;
  plan.body = absl::StrCat(
      "const I64 t = (I64)g0; if (t == (I64)", a.GetInt("ignore_index"),
      ") { EACH(OUT_AT(0.0);) } else { const WIDE scale = ", per_sample ? "(WIDE)g1" : "s0",
      "; EACH(WIDE v = ",
      ls > 0 ? absl::StrCat("-scale * ", Literal(ls), " / (WIDE)n_red * ", Weight(weighted, "j"))
             : "0.0",
      "; if (j == t) v += -scale * (1 - ", Literal(ls), ") * ", Weight(weighted, "t"),
      "; OUT_AT(v);) }");
  plan.cooperative = true;
  return plan;
}

GroupPlan ScaledSumPlan(int64_t rank, double divisor) {
  GroupPlan plan;
  plan.walked = {0};
  for (int64_t d = 0; d < rank; ++d) plan.dims.push_back(d);
  plan.compute = DType::kF64;
  plan.scalar = divisor;
  plan.body = "WIDE acc = 0; EACH(acc += X0(off);) GROUP_SUM(acc); OUT(acc / s0);";
  plan.cooperative = true;
  return plan;
}

namespace {

// std::max(v, lo) as the CPU evaluates it (NaN stays NaN).
std::string Max(const std::string& v, const std::string& lo) {
  return absl::StrCat("((", v, ") < ", lo, " ? ", lo, " : (", v, "))");
}
// log(x) and log(1 - x) clamped at -100 like PyTorch.
std::string ClampedLog(const std::string& x) { return Max(absl::StrCat("log(", x, ")"), "-100.0"); }
std::string ClampedLog1m(const std::string& x) {
  return Max(absl::StrCat("log1p(-(", x, "))"), "-100.0");
}
// log(1 + exp(-x)) without overflow for either sign.
std::string SoftplusNeg(const std::string& x) {
  return absl::StrCat("(", Max(absl::StrCat("-(", x, ")"), "0.0"), " + log1p(exp(-fabs(", x,
                      "))))");
}
std::string SigmoidNeg(const std::string& x) {
  return absl::StrCat("((", x, ") >= 0 ? exp(-(", x, ")) / (1 + exp(-(", x, "))) : 1 / (1 + exp(",
                      x, ")))");
}

ElementwiseExpr Expr(int arity, std::string expr, std::vector<double> scalars = {}) {
  ElementwiseExpr e;
  e.arity = arity;
  e.expr = std::move(expr);
  e.scalars = std::move(scalars);
  return e;
}
std::string Neg(const ElementwiseExpr& e) { return absl::StrCat("-(", e.expr, ")"); }

}  // namespace

absl::Span<const PointwiseLossForm> PointwiseLosses() {
  using V = std::vector<ElementwiseExpr>;
  static const PointwiseLossForm kForms[] = {
      {"l1_loss_elementwise", [](const Attrs&, int) { return V{Expr(2, "fabs(a - b)")}; }},
      {"l1_loss_elementwise_backward",
       [](const Attrs&, int) {
         const ElementwiseExpr gx = Expr(3, "a * (WIDE)((b - c > 0) - (b - c < 0))");
         return V{gx, Expr(3, Neg(gx))};
       }},
      {"binary_cross_entropy_elementwise",
       [](const Attrs&, int) {
         return V{Expr(
             2, absl::StrCat("-(b * ", ClampedLog("a"), " + (1 - b) * ", ClampedLog1m("a"), ")"))};
       },
       /*checks_probabilities=*/true},
      {"binary_cross_entropy_elementwise_backward",
       [](const Attrs&, int) {
         // PyTorch's denominator floor keeps x = 0 or 1 finite.
         return V{Expr(3, absl::StrCat("a * (b - c) / ", Max("(1 - b) * b", "1e-12"))),
                  Expr(3, absl::StrCat("a * (", ClampedLog1m("b"), " - ", ClampedLog("b"), ")"))};
       }},
      {"binary_cross_entropy_with_logits_elementwise",
       [](const Attrs&, int inputs) {
         // (1 - t) x + (1 + (pw - 1) t) softplus(-x), pw = 1 without pos_weight.
         const std::string pw = inputs > 2 ? "c" : "1.0";
         return V{Expr(
             inputs, absl::StrCat("(1 - b) * a + (1 + (", pw, " - 1) * b) * ", SoftplusNeg("a")))};
       }},
      {"binary_cross_entropy_with_logits_elementwise_backward",
       [](const Attrs&, int inputs) {
         const std::string pw = inputs > 3 ? "d" : "1.0";
         V out = {Expr(inputs, absl::StrCat("a * ((1 - c) - (1 + (", pw, " - 1) * c) * ",
                                            SigmoidNeg("b"), ")")),
                  Expr(inputs, absl::StrCat("a * (-b + (", pw, " - 1) * ", SoftplusNeg("b"), ")"))};
         if (inputs > 3) out.push_back(Expr(inputs, absl::StrCat("a * c * ", SoftplusNeg("b"))));
         return out;
       }},
      // smooth_l1 (beta > 0; the op routes beta = 0 to l1): quadratic inside |d| < beta.
      {"smooth_l1_loss_elementwise",
       [](const Attrs& a, int) {
         return V{Expr(
             2, "fabs(a - b) < s0 ? 0.5 * fabs(a - b) * fabs(a - b) / s0 : fabs(a - b) - 0.5 * s0",
             {a.GetFloat("beta")})};
       }},
      {"smooth_l1_loss_elementwise_backward",
       [](const Attrs& a, int) {
         const ElementwiseExpr gx = Expr(
             3, "a * (b - c < -s0 ? -1.0 : b - c > s0 ? 1.0 : (b - c) / s0)", {a.GetFloat("beta")});
         return V{gx, Expr(3, Neg(gx), gx.scalars)};
       }},
      {"huber_loss_elementwise",
       [](const Attrs& a, int) {
         return V{Expr(
             2,
             "fabs(a - b) < s0 ? 0.5 * fabs(a - b) * fabs(a - b) : s0 * (fabs(a - b) - 0.5 * s0)",
             {a.GetFloat("delta")})};
       }},
      {"huber_loss_elementwise_backward",
       [](const Attrs& a, int) {
         const ElementwiseExpr gx =
             Expr(3, "a * (b - c < -s0 ? -s0 : b - c > s0 ? s0 : b - c)", {a.GetFloat("delta")});
         return V{gx, Expr(3, Neg(gx), gx.scalars)};
       }},
      // PyTorch's kl_div: exp(t) (t - x) with log targets, else xlogy(t, t) - t x.
      {"kl_div_elementwise",
       [](const Attrs& a, int) {
         return V{Expr(2, a.GetBool("log_target") ? "exp(b) * (b - a)"
                                                  : "(b == 0 ? 0.0 : b * log(b)) - b * a")};
       }},
      {"kl_div_elementwise_backward",
       [](const Attrs& a, int) {
         // Without log targets the target's gradient is autograd's through xlogy(t, t): NaN at
         // t = 0.
         if (a.GetBool("log_target")) {
           return V{Expr(3, "-a * exp(c)"), Expr(3, "a * exp(c) * (c - b) + a * exp(c)")};
         }
         return V{Expr(3, "-a * c"), Expr(3, "(c != 0 ? a * log(c) : 0.0) + a * c / c - a * b")};
       }},
  };
  return kForms;
}

}  // namespace tensord::gpu
