#include "server/backends/gpu/codegen/sort_source.h"

#include "absl/strings/str_cat.h"

namespace tensord::gpu {

namespace {

// LESS(a, b): a before b ascending, NaN largest.
std::string Less(DType dtype) {
  return IsFloat(dtype) ? "#define LESS(a, b) (!isnan(a) && (isnan(b) || (a) < (b)))\n"
                        : "#define LESS(a, b) ((a) < (b))\n";
}

}  // namespace

std::string RenderRankSort(const Dialect& d, const std::string& name, DType dtype, bool values) {
  const std::string L = d.int64, S = StorageType(d, dtype), G = d.global;
  std::string s = absl::StrCat(Preamble(d, {dtype}), Less(dtype), d.kernel, " ", name, "(");
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

std::string RenderSortGather(const Dialect& d, const std::string& name, DType dtype) {
  const std::string L = d.int64, S = StorageType(d, dtype), G = d.global;
  return absl::StrCat(
      Preamble(d, {dtype}), d.kernel, " ", name, "(", G, " ", S, "* keys, ", G, " ", L, "* idx, ",
      G, " const ", S, "* x, const ", L, " n, const ", L, " size, const ", L, " inner) {\n  const ",
      L, " i = ", d.global_id, ";\n  if (i >= n) return;\n  const ", L,
      " in = i % inner, j = i / inner % size, o = i / (inner * size);\n  const ", L,
      " at = (o * inner + in) * size + j;\n  keys[at] = x[i];\n  idx[at] = j;\n}\n");
}

std::string RenderMergePass(const Dialect& d, const std::string& name, DType dtype) {
  const std::string L = d.int64, S = StorageType(d, dtype), G = d.global;
  std::string s = absl::StrCat(Preamble(d, {dtype}), Less(dtype),
                               // BEFORE(a, b): a comes before b in the sorted line.
                               "#define BEFORE(a, b) (descending ? LESS(b, a) : LESS(a, b))\n",
                               d.kernel, " ", name, "(");
  absl::StrAppend(
      &s, G, " ", S, "* out_keys, ", G, " ", L, "* out_idx, ", G, " const ", S, "* keys, ", G,
      " const ", L, "* idx, const ", L, " n, const ", L, " size, const ", L,
      " width, const int descending) {\n  const ", L, " i = ", d.global_id,
      ";\n  if (i >= n) return;\n  const ", L, " line = i - i % size, p = i % size;\n  const ", L,
      " start = p - p % (2 * width);\n  const ", L,
      " mid = min(start + width, size), end = min(start + 2 * width, size);\n  const ", S,
      " v = keys[i];\n  const int left = p < mid;\n",
      // The other run, and how many of its elements go before v: those strictly before it
      // (v in the left run: a tie stays behind v), or not after it (v in the right run).
      "  ", L, " lo = left ? mid : start, hi = left ? end : mid;\n  while (lo < hi) {\n    const ",
      L, " m = lo + (hi - lo) / 2;\n    const ", S,
      " u = keys[line + m];\n    const int goes_first = left ? BEFORE(u, v) : !BEFORE(v, u);\n"
      "    if (goes_first) lo = m + 1; else hi = m;\n  }\n  const ",
      L, " place = start + (left ? p - start : p - mid) + (lo - (left ? mid : start));\n",
      "  out_keys[line + place] = v;\n  out_idx[line + place] = idx[i];\n}\n");
  return s;
}

std::string RenderSortScatter(const Dialect& d, const std::string& name, DType dtype, bool values) {
  const std::string L = d.int64, S = StorageType(d, dtype), G = d.global;
  std::string s = absl::StrCat(Preamble(d, {dtype}), d.kernel, " ", name, "(");
  if (values) absl::StrAppend(&s, G, " ", S, "* values, ");
  absl::StrAppend(&s, G, " ", L, "* indices, ", G, " const ", S, "* keys, ", G, " const ", L,
                  "* idx, const ", L, " n_out, const ", L, " size, const ", L, " inner, const ", L,
                  " k) {\n  const ", L, " i = ", d.global_id,
                  ";\n  if (i >= n_out) return;\n  const ", L,
                  " in = i % inner, p = i / inner % k, o = i / (inner * k);\n  const ", L,
                  " at = (o * inner + in) * size + p;\n  indices[i] = idx[at];\n",
                  values ? "  values[i] = keys[at];\n" : "", "}\n");
  return s;
}

}  // namespace tensord::gpu
