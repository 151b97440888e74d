#include "server/backends/gpu/codegen/tree_reduction_source.h"

#include "absl/strings/str_cat.h"

namespace tensord::gpu {

std::string RenderTreeReduce(const Dialect& d, const TreeReduceKernel& k) {
  const bool is_float = IsFloat(k.compute);
  const bool sums = k.fold == TreeFold::kSum || k.fold == TreeFold::kMean;
  const std::string L = d.int64;
  std::string s = Preamble(d, {k.input, k.compute, k.output, DType::kF64});
  // Sums accumulate as the group template's ACC; extrema compare in T (NaN wins, as
  // BEATS_MAX/BEATS_MIN there).
  absl::StrAppend(&s, "#define T ", ComputeType(d, k.compute), "\n#define ACC ",
                  sums ? (is_float ? "WIDE" : L) : "T", "\n",
                  is_float ? "#define ISNAN(v) isnan(v)\n" : "#define ISNAN(v) 0\n");
  std::string fold;
  switch (k.fold) {
    case TreeFold::kSum:
    case TreeFold::kMean:
      fold = "(a) + (b)";
      break;
    case TreeFold::kMax:
      fold = "(!ISNAN(a) && (ISNAN(b) || (b) > (a))) ? (b) : (a)";
      break;
    case TreeFold::kMin:
      fold = "(!ISNAN(a) && (ISNAN(b) || (b) < (a))) ? (b) : (a)";
      break;
  }
  absl::StrAppend(&s, "#define FOLD(a, b) (", fold, ")\n#define SIZE ", k.size, "\n");
  absl::StrAppend(&s, d.kernel, " ", k.name, "(", d.global, " ", StorageType(d, k.output),
                  "* out, ", d.global, " const ", StorageType(d, k.input), "* x0, ", d.global,
                  " const ", L, "* geom, const ", L,
                  " n_groups, const int kept_rank, const int red_rank, const ", L, " n_red, const ",
                  L, " slices, const ", L, " chunk, const ", L, " count) {\n");
  absl::StrAppend(&s, "  ", d.local, " ACC part[SIZE];\n  const ", L, " w = (", L, ")", d.group_id,
                  ";\n  const ", L, " i = w / slices;\n  const ", L,
                  " begin = (w - i * slices) * chunk;\n  const ", L,
                  " end = w - i * slices + 1 == slices ? n_red : begin + chunk;\n  const int lid = "
                  "(int)",
                  d.local_id, ";\n  ", L, " base = 0;\n");
  absl::StrAppend(&s, OffsetLoop("i", "kept_rank", "geom[", {"base"}, {"geom[kept_rank + "}, d));
  const std::string load = absl::StrCat("(T)(", Load(k.input, "x0[off]"), ")");
  absl::StrAppend(&s, "  ACC acc = 0", sums ? ", acc_c = 0" : "", ";\n");
  absl::StrAppend(&s, "  for (", L, " j = begin + lid; j < end; j += SIZE) {\n    ", L,
                  " off = base;\n",
                  OffsetLoop("j", "red_rank", "geom[2 * kept_rank + ", {"off"},
                             {"geom[2 * kept_rank + red_rank + "}, d));
  if (sums) {
    absl::StrAppend(&s, "    ", is_float ? "WIDE_ADD(acc, acc_c, " : "acc += (", load, ");\n");
  } else {
    absl::StrAppend(&s, "    const ACC v = ", load,
                    ";\n    acc = j == begin + lid ? v : FOLD(acc, v);\n");
  }
  absl::StrAppend(&s, "  }\n");
  absl::StrAppend(
      &s, "  part[lid] = ", sums && is_float ? "acc - acc_c" : "acc", ";\n  ", d.barrier,
      ";\n  for (int h = SIZE / 2; h > 0; h >>= 1) {\n    if (lid < h) "
      "part[lid] = FOLD(part[lid], part[lid + h]);\n    ",
      d.barrier, ";\n  }\n  if (lid == 0 && i < n_groups) out[w] = ",
      Store(d, k.output,
            k.fold == TreeFold::kMean && !k.partial ? "part[0] / (WIDE)count" : "part[0]"),
      ";\n}\n");
  return s;
}

}  // namespace tensord::gpu
