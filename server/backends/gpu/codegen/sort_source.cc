#include "server/backends/gpu/codegen/sort_source.h"

#include "absl/strings/str_cat.h"

namespace tensord::gpu {

std::string RenderRankSort(const Dialect& d, const std::string& name, DType dtype, bool values) {
  const std::string L = d.int64, S = StorageType(d, dtype), G = d.global;
  // LESS(a, b): a before b ascending, NaN largest.
  const std::string less = IsFloat(dtype)
                               ? "#define LESS(a, b) (!isnan(a) && (isnan(b) || (a) < (b)))\n"
                               : "#define LESS(a, b) ((a) < (b))\n";
  std::string s = absl::StrCat(Preamble(d, {dtype}), less, d.kernel, " ", name, "(");
  if (values) absl::StrAppend(&s, G, " ", S, "* values, ");
  absl::StrAppend(
      &s, G, " ", L, "* indices, ", G, " const ", S, "* x, const ", L, " n, const ", L,
      " outer, const ", L, " size, const ", L, " inner, const ", L,
      " k, const int descending) {\n  const ", L, " i = ", d.global_id,
      ";\n  if (i >= n) return;\n  const ", L,
      " in = i % inner, j = i / inner % size, o = i / (inner * size);\n  const ", L,
      " base = o * size * inner + in;\n  const ", S, " v = x[base + j * inner];\n  ", L,
      " place = 0;\n  for (", L, " a = 0; a < size; ++a) {\n    const ", S,
      " u = x[base + a * inner];\n    const int ahead = descending ? LESS(v, u) : LESS(u, v);\n"
      "    const int behind = descending ? LESS(u, v) : LESS(v, u);\n"
      "    place += ahead || (!behind && a < j);\n  }\n  if (place >= k) return;\n  const ",
      L, " at = o * k * inner + in + place * inner;\n  indices[at] = j;\n",
      values ? "  values[at] = v;\n" : "", "}\n");
  return s;
}

}  // namespace tensord::gpu
