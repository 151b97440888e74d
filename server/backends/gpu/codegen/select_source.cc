#include "server/backends/gpu/codegen/select_source.h"

#include "absl/strings/str_cat.h"

namespace tensord::gpu {
namespace {

// The opening of a chunk kernel after its arguments: c, its element range [first, end) and,
// for the writers, j, its first output position.
std::string ChunkRange(const Dialect& d, bool writes) {
  const std::string L = d.int64;
  std::string s = absl::StrCat(") {\n  const ", L, " c = ", d.global_id, ";\n  const ", L,
                               " first = c * chunk;\n  if (first >= n) return;\n  const ", L,
                               " end = first + chunk < n ? first + chunk : n;\n");
  if (writes) absl::StrAppend(&s, "  ", L, " j = offsets[c];\n");
  return s;
}

std::string ChunkArgs(const Dialect& d) {
  const std::string L = d.int64;
  return absl::StrCat(d.global, " const ", L, "* geom, const ", L, " n, const int rank, const ", L,
                      " chunk");
}

}  // namespace

std::string RenderChunkCount(const Dialect& d, const std::string& name, DType mask) {
  const std::string L = d.int64;
  return absl::StrCat(
      Preamble(d, {mask}), d.kernel, " ", name, "(", d.global, " ", L, "* counts, ", d.global,
      " const ", StorageType(d, mask), "* m, ", ChunkArgs(d), ChunkRange(d, false), "  ", L,
      " count = 0;\n  for (", L, " e = first; e < end; ++e) {\n    ", L, " mo = 0;\n",
      OffsetLoop("e", "rank", "geom[", {"mo"}, {"geom[rank + "}, d),
      "    count += ", Load(mask, "m[mo]"), " != 0;\n  }\n  counts[c] = count;\n}\n");
}

std::string RenderSelection(const Dialect& d, const std::string& name, DType dtype,
                            Selection what) {
  const std::string L = d.int64, S = StorageType(d, dtype);
  const std::string offsets = absl::StrCat(d.global, " const ", L, "* offsets, ");
  std::string s = Preamble(d, {dtype});
  switch (what) {
    case Selection::kNonzeroIndices:
      absl::StrAppend(&s, d.kernel, " ", name, "(", d.global, " ", L, "* out, ", d.global,
                      " const ", S, "* x, ", offsets, ChunkArgs(d), ", const int column",
                      ChunkRange(d, true), "  for (", L, " e = first; e < end; ++e) {\n    if (",
                      Load(dtype, "x[e]"), " == 0) continue;\n    ", L,
                      " rem = e;\n    for (int k = rank - 1; k >= 0; --k) {\n      const ", L,
                      " idx = rem % geom[k];\n      rem /= geom[k];\n",
                      "      if (column < 0) out[j * rank + k] = idx;\n",
                      "      else if (k == column) out[j] = idx;\n    }\n",
                      "    if (column >= rank) out[j] = 0;\n    ++j;\n  }\n}\n");
      break;
    case Selection::kMaskedValues:
      absl::StrAppend(
          &s, d.kernel, " ", name, "(", d.global, " ", S, "* out, ", d.global, " const ", S,
          "* x, ", d.global, " const ", StorageType(d, DType::kBool), "* m, ", offsets,
          ChunkArgs(d), ChunkRange(d, true), "  for (", L, " e = first; e < end; ++e) {\n    ", L,
          " xo = 0, mo = 0;\n",
          OffsetLoop("e", "rank", "geom[", {"xo", "mo"}, {"geom[rank + ", "geom[rank * 2 + "}, d),
          "    if (m[mo]) out[j++] = x[xo];\n  }\n}\n");
      break;
    case Selection::kMaskedPlacement:
      absl::StrAppend(&s, d.kernel, " ", name, "(", d.global, " ", S, "* out, ", d.global,
                      " const ", S, "* g, ", d.global, " const ", StorageType(d, DType::kBool),
                      "* m, ", offsets, ChunkArgs(d), ChunkRange(d, true), "  for (", L,
                      " e = first; e < end; ++e) {\n    ", L, " mo = 0;\n",
                      OffsetLoop("e", "rank", "geom[", {"mo"}, {"geom[rank + "}, d),
                      "    out[e] = m[mo] ? g[j++] : (", S, ")0;\n  }\n}\n");
      break;
  }
  return s;
}

}  // namespace tensord::gpu
