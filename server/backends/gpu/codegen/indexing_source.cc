#include "server/backends/gpu/codegen/indexing_source.h"

#include "absl/strings/str_cat.h"

namespace tensord::gpu {

std::string RenderGather(const Dialect& d, const std::string& name, DType storage, DType index) {
  const std::string L = d.int64, S = StorageType(d, storage), I = StorageType(d, index);
  return absl::StrCat(
      Preamble(d, {storage}), d.kernel, " ", name, "(", d.global, " ", S, "* out, ", d.global,
      " const ", S, "* x, ", d.global, " const ", I, "* idx, ", d.global, " const ", L,
      "* geom, const ", L, " n, const int rank, const ", L, " dim_stride) {\n  const ", L,
      " i = ", d.global_id, ";\n  if (i >= n) return;\n  ", L, " xo = 0;\n  ", L, " io = 0;\n",
      OffsetLoop("i", "rank", "geom[", {"xo", "io"}, {"geom[rank + ", "geom[rank * 2 + "}, d),
      "  out[i] = x[xo + (", L, ")idx[io] * dim_stride];\n}\n");
}

std::string RenderListedWrite(const Dialect& d, const std::string& name, DType dtype,
                              ListedWrite how) {
  const std::string L = d.int64, T = StorageType(d, dtype);
  std::string s =
      absl::StrCat(Preamble(d, {dtype}), d.kernel, " ", name, "(", d.global, " ", T, "* out, ");
  if (how != ListedWrite::kAddToZero) absl::StrAppend(&s, d.global, " const ", T, "* x, ");
  absl::StrAppend(&s, d.global, " const ", T, "* src, ", d.global, " const ", L, "* table, const ",
                  L, " n, const ", T, " alpha) {\n  const ", L, " i = ", d.global_id,
                  ";\n  if (i >= n) return;\n  const ", L,
                  " first = table[i], end = table[i + 1];\n");
  switch (how) {
    case ListedWrite::kAssign:
      absl::StrAppend(&s, "  out[i] = first == end ? x[i] : src[table[end - 1]];\n}\n");
      break;
    case ListedWrite::kAdd:
    case ListedWrite::kAddToZero:
      absl::StrAppend(
          &s, "  ", T, " acc = ", how == ListedWrite::kAdd ? "x[i]" : "0", ";\n  for (", L,
          " k = first; k < end; ++k) acc += alpha * src[table[k]];\n  out[i] = acc;\n}\n");
      break;
  }
  return s;
}

std::string RenderOneHot(const Dialect& d, const std::string& name, DType index) {
  const std::string L = d.int64;
  return absl::StrCat(d.preamble, d.kernel, " ", name, "(", d.global, " ", L, "* out, ", d.global,
                      " const ", StorageType(d, index), "* idx, const ", L, " n, const ", L,
                      " classes) {\n  const ", L, " i = ", d.global_id,
                      ";\n  if (i >= n) return;\n  out[i * classes + idx[i]] = 1;\n}\n");
}

}  // namespace tensord::gpu
