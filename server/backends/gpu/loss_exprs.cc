#include "server/backends/gpu/loss_exprs.h"

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
  plan.body = absl::StrCat("const I64 t = (I64)g0; double l = 0; if (t != (I64)",
                           a.GetInt("ignore_index"), ") { EACH(if (j == t) l = -(1 - ", Literal(ls),
                           ") * ", Weight(weighted, "j"), " * (double)X0(off);) ");
  if (ls > 0) {
    absl::StrAppend(&plan.body, "double smooth = 0; EACH(smooth -= ", Weight(weighted, "j"),
                    " * (double)X0(off);) l += ", Literal(ls), " / (double)n_red * smooth; ");
  }
  absl::StrAppend(&plan.body, "} OUT(l);");
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
      ") { EACH(OUT_AT(0.0);) } else { const double scale = ", per_sample ? "(double)g1" : "s0",
      "; EACH(double v = ",
      ls > 0 ? absl::StrCat("-scale * ", Literal(ls), " / (double)n_red * ", Weight(weighted, "j"))
             : "0.0",
      "; if (j == t) v += -scale * (1 - ", Literal(ls), ") * ", Weight(weighted, "t"),
      "; OUT_AT(v);) }");
  return plan;
}

GroupPlan ScaledSumPlan(int64_t rank, double divisor) {
  GroupPlan plan;
  plan.walked = {0};
  for (int64_t d = 0; d < rank; ++d) plan.dims.push_back(d);
  plan.compute = DType::kF64;
  plan.scalar = divisor;
  plan.body = "double acc = 0; EACH(acc += X0(off);) OUT(acc / s0);";
  return plan;
}

}  // namespace tensord::gpu
