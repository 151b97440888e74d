#include "server/backends/gpu/codegen/reduction_exprs.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/ops/reduction.h"

namespace tensord::gpu {
namespace {

// How an op names the dims a group spans.
enum class Dims {
  kList,         // "dim": a list, absent = every dim (sum, amax, var, ...)
  kSingleOrAll,  // "dim": one int, absent = every dim (prod, max, argmax, ...)
  kOne,          // "dim": one int, required (scans, softmax)
};

struct Entry {
  Dims dims;
  std::vector<int> walked;
  std::vector<int> groups;
  bool compute_in_output;  // else in the first walked input's dtype
  std::function<std::string(const Attrs&)> body;
  std::function<absl::StatusOr<double>(const std::string& op, const Attrs&)> scalar = nullptr;
  bool indices_with_dim = false;  // given a dim, a second output of indices (max, min)
};

std::function<std::string(const Attrs&)> Fixed(std::string body) {
  return [body](const Attrs&) { return body; };
}

// max/min and their relatives: the first element, replaced by each that beats it (`at` -1
// until one is seen); across a work group the items' extrema meet as the first of the best.
std::string Extremum(bool largest, bool with_index, const std::string& out) {
  const std::string which = largest ? "MAX" : "MIN";
  return absl::StrCat("T acc = 0; I64 at = -1; EACH(const T v = X0(off); if (at < 0 || BEATS_",
                      which, "(v, acc)) { acc = v; at = j; }) GROUP_ARG", which, "(acc, at); ", out,
                      with_index ? " IDX(at);" : "");
}

std::function<std::string(const Attrs&)> MaxMinBody(bool largest) {
  return [largest](const Attrs& a) { return Extremum(largest, a.Has("dim"), "OUT(acc);"); };
}

std::string VarBody(bool is_std) {
  return absl::StrCat(
      "WIDE mean = 0, mean_c = 0; EACH(WIDE_ADD(mean, mean_c, (WIDE)X0(off));) GROUP_SUM(mean); "
      "mean /= (WIDE)n_red; WIDE m2 = 0, m2_c = 0; "
      "EACH(const WIDE e = (WIDE)X0(off) - mean; WIDE_ADD(m2, m2_c, e * e);) GROUP_SUM(m2); "
      "const WIDE v = m2 / fmax((WIDE)0, (WIDE)n_red - s0); OUT(",
      is_std ? "sqrt(v)" : "v", ");");
}

// The row maximum (NaN wins) and the sum of exp(x - max), in T as the CPU's softmax loop.
constexpr char kSoftmaxSums[] =
    "T m = -INFINITY; EACH(const T v = X0(off); if (BEATS_MAX(v, m)) m = v;) GROUP_MAX(m); "
    "T s = 0; EACH(s += exp(X0(off) - m);) GROUP_SUM(s); ";

// The same with the sum in double (logsumexp, cross_entropy's log-softmax).
constexpr char kLogSumExpSums[] =
    "T m = -INFINITY; EACH(const T v = X0(off); if (BEATS_MAX(v, m)) m = v;) GROUP_MAX(m); "
    "WIDE s = 0, s_c = 0; EACH(WIDE_ADD(s, s_c, (WIDE)exp(X0(off) - m));) GROUP_SUM(s); ";

// torch's norm: inf / -inf the largest / smallest |x| (NaN wins; the smallest as the largest
// of -|x| across a work group), 0 the non-zero count.
std::string NormBody(const Attrs& a) {
  const double p = a.GetFloat("p");
  if (std::isinf(p)) {
    return absl::StrCat("WIDE a = ", p > 0 ? "0.0" : "INFINITY",
                        "; EACH(const WIDE m = fabs((WIDE)X0(off)); if (isnan(m) || m ",
                        p > 0 ? ">" : "<", " a) a = m;) ",
                        p > 0 ? "GROUP_MAX(a);" : "a = -a; GROUP_MAX(a); a = -a;", " OUT(a);");
  }
  if (p == 0) return "WIDE s = 0; EACH(s += X0(off) != (T)0 ? 1.0 : 0.0;) GROUP_SUM(s); OUT(s);";
  if (p == 1) {
    return "WIDE s = 0, s_c = 0; EACH(WIDE_ADD(s, s_c, fabs((WIDE)X0(off)));) GROUP_SUM(s); "
           "OUT(s);";
  }
  if (p == 2) {
    return "WIDE s = 0, s_c = 0; EACH(const WIDE e = (WIDE)X0(off); WIDE_ADD(s, s_c, e * e);) "
           "GROUP_SUM(s); OUT(sqrt(s));";
  }
  return "WIDE s = 0; EACH(s += pow(fabs((WIDE)X0(off)), s0);) GROUP_SUM(s); "
         "OUT(pow(s, (WIDE)1 / s0));";
}

// PyTorch's norm_backward, branch by branch (see the CPU kernel); g0 the gradient, g1 the norm.
std::string NormBackwardBody(const Attrs& a) {
  const double p = a.GetFloat("p");
  const std::string v = "const WIDE v = (WIDE)X0(off); ";
  const std::string sgn = "(isnan(v) ? v : (WIDE)((v > 0) - (v < 0)))";
  const std::string n = "const WIDE n = (WIDE)g1; ";
  if (p == 0) return "EACH(OUT_AT(0.0);)";
  if (p == 1) return absl::StrCat("EACH(", v, "OUT_AT(", sgn, " * (WIDE)g0);)");
  if (p == 2) return absl::StrCat(n, "EACH(", v, "OUT_AT(n == 0 ? 0.0 : (WIDE)g0 * (v / n));)");
  if (std::isinf(p)) {
    const std::string selected = "(fabs(v) == n || isnan(fabs(v)))";
    return absl::StrCat(n, "I64 count = 0; EACH(", v, "count += ", selected,
                        ";) GROUP_SUM(count); EACH(", v, "OUT_AT(", sgn,
                        " * (((WIDE)g0 / (WIDE)count) * (", selected, " ? 1.0 : 0.0)));)");
  }
  if (p < 1) {
    return absl::StrCat(n, "EACH(", v, "const WIDE scaled = v == 0 ? 0.0 : ", sgn,
                        " * pow(fabs(v), s0 - 1); OUT_AT(scaled * (WIDE)g0 * pow(n, 1 - s0));)");
  }
  const std::string scaled =
      p < 2 ? absl::StrCat(sgn, " * pow(fabs(v), s0 - 1)") : "v * pow(fabs(v), s0 - 2)";
  return absl::StrCat(n, "EACH(", v, "const WIDE scaled = ", scaled,
                      "; OUT_AT(n == 0 ? 0.0 : scaled * ((WIDE)g0 / pow(n, s0 - 1)));)");
}

// amax_backward: the gradient shared by the elements equal to the result (g1); match_nan
// lets a NaN result select the NaNs (max without dim).
std::string AMaxBackwardBody(const Attrs& a) {
  const std::string selected =
      absl::StrCat("(v == g1 || (", a.GetBool("match_nan") ? 1 : 0, " && ISNAN(v) && ISNAN(g1)))");
  return absl::StrCat("I64 count = 0; EACH(const T v = X0(off); count += ", selected,
                      ";) GROUP_SUM(count); EACH(const T v = X0(off); OUT_AT(", selected,
                      " ? g0 / (T)count : (T)0);)");
}

absl::StatusOr<double> Correction(const std::string& op, const Attrs& a) {
  return VarCorrection(op, a);
}
absl::StatusOr<double> P(const std::string&, const Attrs& a) { return a.GetFloat("p"); }
absl::StatusOr<double> BackwardCorrection(const std::string&, const Attrs& a) {
  return a.GetFloat("correction");
}

const std::map<std::string, Entry>& Table() {
  using D = Dims;
  static const auto* table = new std::map<std::string, Entry>{
      {"sum",
       {D::kList,
        {0},
        {},
        false,
        Fixed("ACC acc = 0, acc_c = 0; EACH(ACC_ADD(acc, acc_c, X0(off));) OUT(acc);")}},
      {"mean",
       {D::kList,
        {0},
        {},
        false,
        Fixed("ACC acc = 0, acc_c = 0; EACH(ACC_ADD(acc, acc_c, X0(off));) "
              "OUT(acc / (WIDE)n_red);")}},
      // torch.prod and the scans cast the input to their dtype first.
      {"prod",
       {D::kSingleOrAll, {0}, {}, true, Fixed("ACC acc = 1; EACH(acc *= X0(off);) OUT(acc);")}},
      {"all",
       {D::kList,
        {0},
        {},
        false,
        Fixed("I64 zeros = 0; EACH(zeros += X0(off) == 0;) GROUP_SUM(zeros); OUT(zeros == 0);")}},
      {"any",
       {D::kList,
        {0},
        {},
        false,
        Fixed("I64 set = 0; EACH(set += X0(off) != 0;) GROUP_SUM(set); OUT(set != 0);")}},
      {"amax", {D::kList, {0}, {}, false, Fixed(Extremum(true, false, "OUT(acc);"))}},
      {"amin", {D::kList, {0}, {}, false, Fixed(Extremum(false, false, "OUT(acc);"))}},
      {"argmax", {D::kSingleOrAll, {0}, {}, false, Fixed(Extremum(true, false, "OUT(at);"))}},
      {"argmin", {D::kSingleOrAll, {0}, {}, false, Fixed(Extremum(false, false, "OUT(at);"))}},
      // With a dim: values and indices; without: one value (the plan drops the index).
      {"max", {D::kSingleOrAll, {0}, {}, false, MaxMinBody(true), nullptr, true}},
      {"min", {D::kSingleOrAll, {0}, {}, false, MaxMinBody(false), nullptr, true}},
      {"var", {D::kList, {0}, {}, false, Fixed(VarBody(false)), Correction}},
      {"std", {D::kList, {0}, {}, false, Fixed(VarBody(true)), Correction}},
      {"logsumexp",
       {D::kList,
        {0},
        {},
        false,
        Fixed(absl::StrCat(kLogSumExpSums, "OUT(isfinite(m) ? (WIDE)m + log(s) : (WIDE)m);"))}},
      {"norm", {D::kList, {0}, {}, false, NormBody, P}},
      {"softmax",
       {D::kOne,
        {0},
        {},
        true,
        Fixed(absl::StrCat(kSoftmaxSums,
                           "const T r = (T)1 / s; EACH(OUT_AT(exp(X0(off) - m) * r);)"))}},
      // (x - max) - log(sum): large inputs keep their precision (the CPU's order).
      {"log_softmax",
       {D::kOne,
        {0},
        {},
        true,
        Fixed(absl::StrCat(kSoftmaxSums, "const T l = log(s); EACH(OUT_AT((X0(off) - m) - l);)"))}},
      // cross_entropy's log-softmax: max and exp in T, the sum in double (its CPU loop).
      {"cross_entropy_log_softmax",
       {D::kOne,
        {0},
        {},
        false,
        Fixed(absl::StrCat(kLogSumExpSums,
                           "const WIDE l = (WIDE)m + log(s); "
                           "EACH(OUT_AT((WIDE)X0(off) - l);)"))}},
      // (grad, output): grad - exp(output) * sum(grad).
      {"cross_entropy_log_softmax_backward",
       {D::kOne,
        {0, 1},
        {},
        false,
        Fixed("WIDE total = 0, total_c = 0; EACH(WIDE_ADD(total, total_c, (WIDE)X0(off));) "
              "GROUP_SUM(total); EACH(OUT_AT((WIDE)X0(off) - exp(X1(off)) * total);)")}},
      {"cumsum",
       {D::kOne, {0}, {}, true, Fixed("ACC acc = 0; EACH(acc += X0(off); OUT_AT(acc);)")}},
      {"cumprod",
       {D::kOne, {0}, {}, true, Fixed("ACC acc = 1; EACH(acc *= X0(off); OUT_AT(acc);)")}},
      // Gradients: (grad, input, result) unless said otherwise.
      {"cumsum_backward",
       {D::kOne,
        {0},
        {},
        false,
        Fixed("WIDE acc = 0; EACH_REV(acc += (WIDE)X0(off); OUT_AT(acc);)")}},
      // prod's and cumprod's gradients without dividing by the input: the prefix products
      // parked in the output, then scaled from the end (the CPU kernel's algorithm).
      {"prod_backward",
       {D::kSingleOrAll,
        {1},
        {0},
        false,
        Fixed("WIDE acc = 1; EACH(OUT_AT(acc); acc *= (WIDE)X0(off);) acc = 1; "
              "EACH_REV(const WIDE prefix = OUT_GET(); OUT_AT((WIDE)g0 * prefix * acc); "
              "acc *= (WIDE)X0(off);)")}},
      {"cumprod_backward",
       {D::kOne,
        {0, 1},
        {},
        false,
        Fixed("WIDE acc = 1; EACH(OUT_AT(acc); acc *= (WIDE)X1(off);) acc = 0; "
              "WIDE next = 0; EACH_REV(const WIDE prefix = OUT_GET(); "
              "acc = (WIDE)X0(off) + next * acc; OUT_AT(prefix * acc); "
              "next = (WIDE)X1(off);)")}},
      {"var_backward",
       {D::kList,
        {1},
        {0, 2},
        false,
        [](const Attrs& a) {
          return absl::StrCat(
              "WIDE mean = 0, mean_c = 0; EACH(WIDE_ADD(mean, mean_c, (WIDE)X0(off));) "
              "GROUP_SUM(mean); mean /= (WIDE)n_red; const WIDE divisor = fmax((WIDE)0, "
              "(WIDE)n_red - "
              "s0); const WIDE "
              "scale = ",
              a.GetBool("std") ? "1.0 / (divisor * (WIDE)g1)" : "2.0 / divisor",
              "; EACH(OUT_AT((WIDE)g0 * ((WIDE)X0(off) - mean) * scale);)");
        },
        BackwardCorrection}},
      {"logsumexp_backward",
       {D::kList,
        {1},
        {0, 2},
        false,
        Fixed("EACH(OUT_AT((WIDE)g0 * exp((WIDE)X0(off) - (WIDE)g1));)")}},
      {"amax_backward", {D::kList, {1}, {0, 2}, false, AMaxBackwardBody}},
      // (grad, indices, input): each gradient to its selected index.
      {"max_dim_backward",
       {D::kOne, {2}, {0, 1}, false, Fixed("EACH(OUT_AT(j == g1 ? g0 : (T)0);)")}},
      {"norm_backward", {D::kList, {1}, {0, 2}, false, NormBackwardBody, P}},
  };
  return *table;
}

// The ops whose bodies add up across a group only through GROUP_SUM / GROUP_MAX and write only
// through OUT / OUT_AT, in no order (GroupPlan::cooperative): a long row of a softmax, a
// cross-entropy over a vocabulary, a variance, runs on a work group on a GPU.
bool Cooperative(const std::string& op) {
  static const auto* ops = new std::set<std::string>{"all",
                                                     "any",
                                                     "argmax",
                                                     "argmin",
                                                     "max",
                                                     "min",
                                                     "norm",
                                                     "norm_backward",
                                                     "var",
                                                     "std",
                                                     "logsumexp",
                                                     "softmax",
                                                     "log_softmax",
                                                     "cross_entropy_log_softmax",
                                                     "var_backward",
                                                     "logsumexp_backward",
                                                     "cross_entropy_log_softmax_backward",
                                                     "amax_backward",
                                                     "max_dim_backward"};
  return ops->count(op) > 0;
}

absl::StatusOr<std::vector<int64_t>> GroupDims(const std::string& op, Dims dims, const Attrs& a,
                                               int64_t rank) {
  switch (dims) {
    case Dims::kList:
      return ReductionDims(op, a, rank);
    case Dims::kSingleOrAll:
      return SingleDimOrAll(op, a, rank);
    case Dims::kOne:
      break;
  }
  if (rank == 0) return std::vector<int64_t>{};
  ASSIGN_OR_RETURN(int64_t d, NormalizeDimFor(op, a.GetInt("dim"), rank));
  return std::vector<int64_t>{d};
}

}  // namespace

bool HasGroup(const std::string& op) { return Table().count(op) > 0; }

absl::StatusOr<GroupPlan> PlanGroup(const std::string& op, const Attrs& attrs,
                                    const std::vector<int64_t>& input_ranks,
                                    const std::vector<DType>& input_dtypes, DType output) {
  auto it = Table().find(op);
  if (it == Table().end()) {
    return Error(Reason::kInternal, absl::StrCat("no group kernel for ", op));
  }
  const Entry& e = it->second;
  for (int w : e.walked) {
    if (w >= static_cast<int>(input_ranks.size())) {
      return Error(Reason::kInternal, absl::StrCat(op, ": missing input ", w));
    }
  }
  GroupPlan plan;
  plan.walked = e.walked;
  plan.groups = e.groups;
  ASSIGN_OR_RETURN(plan.dims, GroupDims(op, e.dims, attrs, input_ranks[e.walked[0]]));
  plan.compute = e.compute_in_output ? output : input_dtypes[e.walked[0]];
  plan.indices = e.indices_with_dim && attrs.Has("dim");
  plan.body = e.body(attrs);
  plan.cooperative = Cooperative(op);
  if (e.scalar) {
    ASSIGN_OR_RETURN(plan.scalar, e.scalar(op, attrs));
  }
  return plan;
}

GroupPlan PreluWeightGradPlan(int64_t rank, bool per_channel, DType dtype) {
  GroupPlan plan;
  plan.walked = {1, 0};  // X0 = x, X1 = grad
  for (int64_t d = 0; d < rank; ++d) {
    if (!per_channel || d != 1) plan.dims.push_back(d);
  }
  plan.compute = dtype;
  plan.body =
      "WIDE acc = 0; EACH(if (!(X0(off) > (T)0)) acc += (WIDE)X0(off) * (WIDE)X1(off);) "
      "GROUP_SUM(acc); OUT(acc);";
  plan.cooperative = true;
  return plan;
}

}  // namespace tensord::gpu
