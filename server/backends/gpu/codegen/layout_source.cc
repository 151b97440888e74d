#include "server/backends/gpu/codegen/layout_source.h"

#include "absl/strings/str_cat.h"

namespace tensord::gpu {
namespace {

// The head every layout kernel shares: out and in of one storage type, then the index.
std::string Head(const Dialect& d, const std::string& name, DType dtype, const std::string& args,
                 const std::string& type) {
  return absl::StrCat(Preamble(d, {dtype}), d.kernel, " ", name, "(", d.global, " ", type,
                      "* out, ", d.global, " const ", type, "* in, ", args, ") {\n  const ",
                      d.int64, " i = ", d.global_id, ";\n  if (i >= n) return;\n");
}

}  // namespace

std::string RenderWindowCopy(const Dialect& d, const std::string& name, DType storage) {
  const std::string L = d.int64;
  std::string s =
      Head(d, name, storage,
           absl::StrCat(d.global, " const ", L, "* geom, const ", L, " n, const int rank, const ",
                        L, " src_offset, const ", L, " dst_offset"),
           StorageType(d, storage));
  absl::StrAppend(
      &s, "  ", L, " src = src_offset;\n  ", L, " dst = dst_offset;\n",
      OffsetLoop("i", "rank", "geom[", {"src", "dst"}, {"geom[rank + ", "geom[rank * 2 + "}, d),
      "  out[dst] = in[src];\n}\n");
  return s;
}

std::string RenderTriangle(const Dialect& d, const std::string& name, DType storage) {
  const std::string L = d.int64, S = StorageType(d, storage);
  std::string s = Head(d, name, storage,
                       absl::StrCat("const ", L, " n, const ", L, " rows, const ", L,
                                    " cols, const ", L, " diagonal, const int lower"),
                       S);
  // col - row is small; comparing it with any diagonal cannot overflow.
  absl::StrAppend(&s, "  const ", L, " col = i % cols;\n  const ", L,
                  " row = (i / cols) % rows;\n  const int keep = lower ? col - row <= diagonal "
                  ": col - row >= diagonal;\n  out[i] = keep ? in[i] : (",
                  S, ")0;\n}\n");
  return s;
}

std::string RenderPadPass(const Dialect& d, const std::string& name, DType dtype) {
  const std::string L = d.int64, T = StorageType(d, dtype);
  std::string s =
      Head(d, name, dtype,
           absl::StrCat(d.global, " const ", L, "* table, const ", L, " n, const ", L,
                        " src_len, const ", L, " dst_len, const ", L, " inner, const ", T, " fill"),
           T);
  // The first term starts the sum, so a lone -0.0 stays -0.0 as in a copy.
  absl::StrAppend(&s, "  const ", L, " b = i % inner;\n  const ", L,
                  " j = (i / inner) % dst_len;\n  const ", L, " base = i / (inner * dst_len) * ",
                  "src_len;\n  const ", L, " first = table[j], end = table[j + 1];\n",
                  "  if (first == end) { out[i] = fill; return; }\n  ", T,
                  " acc = in[(base + table[first]) * inner + b];\n  for (", L,
                  " k = first + 1; k < end; ++k) acc += in[(base + table[k]) * inner + b];\n",
                  "  out[i] = acc;\n}\n");
  return s;
}

}  // namespace tensord::gpu
