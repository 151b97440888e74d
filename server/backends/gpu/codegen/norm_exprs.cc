#include "server/backends/gpu/codegen/norm_exprs.h"

#include "absl/strings/str_cat.h"

namespace tensord::gpu {
namespace {

// The group's mean (a pass), and its biased variance about `mean` (a pass), as the CPU's
// RowMoments; a launch may make both, or one each with the mean read back from a table.
#define TD_MEAN_PASS                                                                          \
  "WIDE mean = 0, mean_c = 0; EACH(WIDE_ADD(mean, mean_c, (WIDE)X0(off));) GROUP_SUM(mean); " \
  "mean = n_red > 0 ? mean / (WIDE)n_red : 0.0; "
#define TD_VARIANCE_PASS                                                                      \
  "WIDE q = 0, q_c = 0; EACH(const WIDE e = (WIDE)X0(off) - mean; WIDE_ADD(q, q_c, e * e);) " \
  "GROUP_SUM(q); const WIDE var = n_red > 0 ? q / (WIDE)n_red : 0.0; "
constexpr char kMean[] = TD_MEAN_PASS;
constexpr char kVarianceAboutTable[] = "const WIDE mean = A0(i); " TD_VARIANCE_PASS;
constexpr char kRowMoments[] =
    TD_MEAN_PASS TD_VARIANCE_PASS "const WIDE rstd = 1.0 / sqrt(var + s0); ";
#undef TD_MEAN_PASS
#undef TD_VARIANCE_PASS

}  // namespace

std::vector<int64_t> RowDims(int64_t rank, int64_t normalized) {
  std::vector<int64_t> dims;
  for (int64_t d = rank - normalized; d < rank; ++d) dims.push_back(d);
  return dims;
}

std::vector<int64_t> BatchDims(int64_t rank, int64_t normalized) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank - normalized; ++d) dims.push_back(d);
  return dims;
}

GroupPlan LayerNormPlan(int64_t rank, int64_t normalized, int inputs, double eps, DType dtype) {
  GroupPlan plan;
  plan.walked = {0};
  for (int t = 1; t < inputs; ++t) plan.tables.push_back(t);
  plan.dims = RowDims(rank, normalized);
  plan.compute = dtype;
  plan.scalar = eps;
  plan.cooperative = true;
  plan.body = absl::StrCat(kRowMoments, "EACH(WIDE v = ((WIDE)X0(off) - mean) * rstd; ",
                           inputs > 1 ? "v *= A0(j); " : "", inputs > 2 ? "v += A1(j); " : "",
                           "OUT_AT(v);)");
  return plan;
}

GroupPlan LayerNormInputGradPlan(int64_t rank, int64_t normalized, bool weighted, double eps,
                                 DType dtype) {
  GroupPlan plan;
  plan.walked = {1, 0};  // X0 = x, X1 = grad
  if (weighted) plan.tables = {2};
  plan.dims = RowDims(rank, normalized);
  plan.compute = dtype;
  plan.scalar = eps;
  const std::string gxhat =
      absl::StrCat("const WIDE gxhat = (WIDE)X1(off) * ", weighted ? "A0(j)" : "1.0", "; ");
  plan.body = absl::StrCat(
      kRowMoments, "WIDE sum_g = 0, sum_gx = 0; EACH(", gxhat,
      "const WIDE xhat = ((WIDE)X0(off) - mean) * rstd; sum_g += gxhat; sum_gx += gxhat * "
      "xhat;) GROUP_SUM(sum_g); GROUP_SUM(sum_gx); const WIDE mg = sum_g / (WIDE)n_red, mgx = "
      "sum_gx / (WIDE)n_red; EACH(",
      gxhat,
      "const WIDE xhat = ((WIDE)X0(off) - mean) * rstd; OUT_AT(rstd * (gxhat - mg - xhat * "
      "mgx));)");
  plan.cooperative = true;
  return plan;
}

GroupPlan RowStatPlan(int64_t rank, int64_t normalized, bool rstd, double eps) {
  GroupPlan plan;
  plan.walked = {0};
  plan.dims = RowDims(rank, normalized);
  plan.compute = DType::kF64;
  plan.scalar = eps;
  // RowMoments' two passes, one a launch: the variance about the mean the first one wrote.
  if (rstd) {
    plan.tables = {1};
    plan.body = absl::StrCat(kVarianceAboutTable, "OUT(1.0 / sqrt(var + s0));");
  } else {
    plan.body = absl::StrCat(kMean, "OUT(mean);");
  }
  plan.cooperative = true;
  return plan;
}

GroupPlan LayerNormWeightGradPlan(int64_t rank, int64_t normalized, DType dtype) {
  GroupPlan plan;
  plan.walked = {0, 1};  // X0 = x, X1 = grad; j is the row
  plan.tables = {2, 3};  // the rows' mean and rstd
  plan.dims = BatchDims(rank, normalized);
  plan.compute = dtype;
  plan.body =
      "WIDE s = 0; EACH(s += (WIDE)X1(off) * (((WIDE)X0(off) - A0(j)) * A1(j));) GROUP_SUM(s); "
      "OUT(s);";
  plan.cooperative = true;
  return plan;
}

GroupPlan LayerNormBiasGradPlan(int64_t rank, int64_t normalized, DType dtype) {
  GroupPlan plan;
  plan.walked = {0};
  plan.dims = BatchDims(rank, normalized);
  plan.compute = dtype;
  plan.body = "WIDE s = 0, s_c = 0; EACH(WIDE_ADD(s, s_c, (WIDE)X0(off));) GROUP_SUM(s); OUT(s);";
  plan.cooperative = true;
  return plan;
}

std::vector<int64_t> ChannelDims(int64_t rank) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
  return dims;
}

GroupPlan BatchNormStatPlan(int64_t rank, bool var, DType dtype) {
  GroupPlan plan;
  plan.walked = {0};
  plan.dims = ChannelDims(rank);
  plan.compute = dtype;
  plan.cooperative = true;
  // Two passes as the CPU's RowMoments, the variance's about the mean the first one wrote.
  if (!var) {
    plan.body = absl::StrCat(kMean, "OUT(mean);");
  } else {
    plan.tables = {1};
    plan.body = absl::StrCat(kVarianceAboutTable, "OUT(var);");
  }
  return plan;
}

GroupPlan BatchNormGradPlan(int64_t rank, bool training, double eps, int part, DType dtype) {
  GroupPlan plan;
  plan.walked = {1, 0};  // X0 = x, X1 = grad
  plan.tables = {2, 3, 4};
  plan.dims = ChannelDims(rank);
  plan.compute = dtype;
  plan.scalar = eps;
  plan.cooperative = true;
  plan.body = "const WIDE mu = A1(i); const WIDE invstd = 1.0 / sqrt(A2(i) + s0); ";
  if (part == 1) {  // sum(gy * xhat)
    absl::StrAppend(&plan.body,
                    "WIDE sum_gx = 0; EACH(sum_gx += (WIDE)X1(off) * ((WIDE)X0(off) - mu) * "
                    "invstd;) GROUP_SUM(sum_gx); OUT(sum_gx);");
  } else if (part == 2) {  // sum(gy)
    absl::StrAppend(&plan.body,
                    "WIDE sum_g = 0; EACH(sum_g += (WIDE)X1(off);) GROUP_SUM(sum_g); OUT(sum_g);");
  } else {
    // Training differentiates through the batch's mean and variance as well: the two sums
    // (tables 3 and 4, as parts 1 and 2 wrote them) spread over the channel.
    plan.tables.insert(plan.tables.end(), {5, 6});
    absl::StrAppend(
        &plan.body, "const WIDE k = A0(i) * invstd; const WIDE mean_g = ",
        training ? "n_red > 0 ? A4(i) / (WIDE)n_red : 0.0" : "0.0",
        "; const WIDE mean_gx = ", training ? "n_red > 0 ? A3(i) / (WIDE)n_red : 0.0" : "0.0",
        "; EACH(const WIDE xhat = ((WIDE)X0(off) - mu) * invstd; OUT_AT(k * "
        "((WIDE)X1(off) - mean_g - xhat * mean_gx));)");
  }
  return plan;
}

}  // namespace tensord::gpu
