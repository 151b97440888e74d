#include "server/backends/gpu/codegen/reduction_source.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace tensord::gpu {
namespace {

// `name`(...): the for header `loop` over `j`, each element's offset `off`, then the statements.
std::string EachMacro(const Dialect& d, const std::string& name, const std::string& loop) {
  const std::string offsets = OffsetLoop("j", "red_rank", "geom[2 * kept_rank + ", {"off"},
                                         {"geom[2 * kept_rank + red_rank + "}, d);
  std::string s = absl::StrCat("#define ", name, "(...) ", loop, " { ", d.int64, " off = base;\n",
                               offsets, "  { __VA_ARGS__ } }\n");
  // Every line of the expansion but the last continues the macro.
  const size_t last = s.size() - 1;
  return absl::StrCat(absl::StrReplaceAll(s.substr(0, last), {{"\n", " \\\n"}}), "\n");
}

}  // namespace

std::string RenderGroup(const Dialect& d, const GroupKernel& k) {
  std::vector<DType> all = k.walked;
  all.insert(all.end(), k.groups.begin(), k.groups.end());
  all.insert(all.end(), k.tables.begin(), k.tables.end());
  all.push_back(k.output);
  all.push_back(k.compute);
  all.push_back(DType::kF64);  // accumulators and s0
  const bool is_float = IsFloat(k.compute);
  const std::string L = d.int64;
  std::string s = Preamble(d, all);
  absl::StrAppend(&s, "#define I64 ", L, "\n#define T ", ComputeType(d, k.compute),
                  "\n#define ACC ", is_float ? "WIDE" : L, "\n#define ACC_ADD(s, c, v) ",
                  is_float ? "WIDE_ADD(s, c, v)" : "s += (v)", "\n");
  absl::StrAppend(&s, is_float ? "#define ISNAN(v) isnan(v)\n" : "#define ISNAN(v) 0\n",
                  "#define BEATS_MAX(v, best) (!ISNAN(best) && (ISNAN(v) || (v) > (best)))\n",
                  "#define BEATS_MIN(v, best) (!ISNAN(best) && (ISNAN(v) || (v) < (best)))\n");
  for (size_t w = 0; w < k.walked.size(); ++w) {
    absl::StrAppend(&s, "#define X", w, "(o) ((T)(", Load(k.walked[w], absl::StrCat("x", w, "[o]")),
                    "))\n");
  }
  for (size_t t = 0; t < k.tables.size(); ++t) {
    absl::StrAppend(&s, "#define A", t, "(k) ((WIDE)(",
                    Load(k.tables[t], absl::StrCat("table", t, "[k]")), "))\n");
  }
  const bool tree = k.group_size > 0;
  // On a work group one item writes the group's output (an expression, so that OUT may stand
  // anywhere a statement may).
  const std::string out_i = absl::StrCat("out[i] = ", Store(d, k.output, "(v)"));
  absl::StrAppend(&s, "#define OUT(v) ",
                  tree ? absl::StrCat("(lid == 0 ? (void)(", out_i, ") : (void)0)") : out_i, "\n",
                  "#define OUT_AT(v) out[off] = ", Store(d, k.output, "(v)"), "\n",
                  "#define OUT_GET() ((WIDE)(", Load(k.output, "out[off]"), "))\n");
  const std::string idx_i = absl::StrCat("out_idx[i] = (", L, ")(v)");
  absl::StrAppend(&s, "#define IDX(v) ",
                  tree ? absl::StrCat("(lid == 0 ? (void)(", idx_i, ") : (void)0)") : idx_i, "\n");
  // A body that folds extrema with their indices across a work group.
  const bool arg_folds = tree && k.body.find("GROUP_ARG") != std::string::npos;
  if (tree) {
    // The items' partials pairwise in local memory; every item reads the total before the
    // next GROUP_SUM or GROUP_MAX may write again.
    absl::StrAppend(
        &s, "#define SIZE ", k.group_size, "\n",
        EachMacro(d, "EACH", absl::StrCat("for (", L, " j = lid; j < n_red; j += SIZE)")),
        "#define GROUP_SUM(s) { part_[lid] = (s); ", d.barrier,
        "; for (int h_ = SIZE / 2; h_ > 0; h_ >>= 1) { if (lid < h_) part_[lid] += "
        "part_[lid + h_]; ",
        d.barrier, "; } (s) = part_[0]; ", d.barrier, "; }\n",
        // The largest partial, a NaN winning as in BEATS_MAX.
        "#define GROUP_MAX(m) { part_[lid] = (WIDE)(m); ", d.barrier,
        "; for (int h_ = SIZE / 2; h_ > 0; h_ >>= 1) { if (lid < h_ && "
        "BEATS_MAX(part_[lid + h_], part_[lid])) part_[lid] = part_[lid + h_]; ",
        d.barrier, "; } (m) = part_[0]; ", d.barrier, "; }\n");
    // The items' extrema with their indices (-1: none seen): the one that beats, or of equals
    // (NaNs included) the first, as one item walking the group in order keeps.
    for (const char* which : {"MAX", "MIN"}) {
      absl::StrAppend(
          &s, "#define GROUP_ARG", which, "(m, at) { pv_[lid] = (m); pi_[lid] = (at); ", d.barrier,
          "; for (int h_ = SIZE / 2; h_ > 0; h_ >>= 1) { if (lid < h_) { const T bv_ = "
          "pv_[lid + h_]; const I64 bi_ = pi_[lid + h_]; if (bi_ >= 0 && (pi_[lid] < 0 || BEATS_",
          which, "(bv_, pv_[lid]) || (!BEATS_", which,
          "(pv_[lid], bv_) && bi_ < pi_[lid]))) { pv_[lid] = bv_; pi_[lid] = bi_; } } ", d.barrier,
          "; } (m) = pv_[0]; (at) = pi_[0]; ", d.barrier, "; }\n");
    }
  } else {
    absl::StrAppend(
        &s, "#define GROUP_SUM(s)\n#define GROUP_MAX(m)\n#define GROUP_ARGMAX(m, at)\n",
        "#define GROUP_ARGMIN(m, at)\n",
        EachMacro(d, "EACH", absl::StrCat("for (", L, " j = 0; j < n_red; ++j)")),
        EachMacro(d, "EACH_REV", absl::StrCat("for (", L, " j = n_red - 1; j >= 0; --j)")));
  }
  absl::StrAppend(&s, d.kernel, " ", k.name, "(", d.global, " ", StorageType(d, k.output), "* out");
  if (k.indices) absl::StrAppend(&s, ", ", d.global, " ", L, "* out_idx");
  for (size_t w = 0; w < k.walked.size(); ++w) {
    absl::StrAppend(&s, ", ", d.global, " const ", StorageType(d, k.walked[w]), "* x", w);
  }
  for (size_t g = 0; g < k.groups.size(); ++g) {
    absl::StrAppend(&s, ", ", d.global, " const ", StorageType(d, k.groups[g]), "* in_g", g);
  }
  for (size_t t = 0; t < k.tables.size(); ++t) {
    absl::StrAppend(&s, ", ", d.global, " const ", StorageType(d, k.tables[t]), "* table", t);
  }
  absl::StrAppend(&s, ", ", d.global, " const ", L, "* geom, const ", L,
                  " n_groups, const int kept_rank, const int red_rank, const ", L,
                  " n_red, const WIDE s0) {\n");
  if (tree) {
    // Every work group is a group: none returns early, so all reach each barrier.
    absl::StrAppend(&s, "  ", d.local, " WIDE part_[SIZE];\n");
    if (arg_folds) {
      absl::StrAppend(&s, "  ", d.local, " T pv_[SIZE];\n  ", d.local, " I64 pi_[SIZE];\n");
    }
    absl::StrAppend(&s, "  const ", L, " i = (", L, ")", d.group_id, ";\n  const int lid = (int)",
                    d.local_id, ";\n  ", L, " base = 0;\n");
  } else {
    absl::StrAppend(&s, "  const ", L, " i = ", d.global_id, ";\n  if (i >= n_groups) return;\n  ",
                    L, " base = 0;\n");
  }
  absl::StrAppend(&s, OffsetLoop("i", "kept_rank", "geom[", {"base"}, {"geom[kept_rank + "}, d));
  for (size_t g = 0; g < k.groups.size(); ++g) {
    const std::string type = ComputeType(d, k.groups[g]);
    absl::StrAppend(&s, "  const ", type, " g", g, " = (", type, ")(",
                    Load(k.groups[g], absl::StrCat("in_g", g, "[i]")), ");\n");
  }
  absl::StrAppend(&s, "  ", k.body, "\n}\n");
  return s;
}

}  // namespace tensord::gpu
