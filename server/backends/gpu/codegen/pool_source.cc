#include "server/backends/gpu/codegen/pool_source.h"

#include "absl/strings/str_cat.h"

namespace tensord::gpu {
namespace {

// ARGMAX(plane, o): the offset in the input plane of window o's first maximum, as the CPU's
// WindowArgMax (a NaN replaces whatever came before it).
constexpr char kArgMax[] =
    "I64 td_argmax(__global const T* p, __global const I64* win, const I64 o, const I64 width,\n"
    "              const I64 dh, const I64 dw) {\n"
    "  const I64 hs = win[o * 5], he = win[o * 5 + 1], ws = win[o * 5 + 2], we = win[o * 5 + 3];\n"
    "  I64 best = hs * width + ws;\n"
    "  T best_v = -INFINITY;\n"
    "  for (I64 ih = hs; ih < he; ih += dh) {\n"
    "    for (I64 iw = ws; iw < we; iw += dw) {\n"
    "      const T v = p[ih * width + iw];\n"
    "      if (v > best_v || isnan(v)) { best_v = v; best = ih * width + iw; }\n"
    "    }\n"
    "  }\n"
    "  return best;\n"
    "}\n";

constexpr char kAvgForward[] =
    "  const I64 hs = win[o * 5], he = win[o * 5 + 1], ws = win[o * 5 + 2], we = win[o * 5 + 3];\n"
    "  T sum = 0;\n"
    "  for (I64 ih = hs; ih < he; ih += dh) {\n"
    "    for (I64 iw = ws; iw < we; iw += dw) sum += p[ih * width + iw];\n"
    "  }\n"
    "  out[i] = (hs >= he || ws >= we) ? (T)0 : sum / (T)win[o * 5 + 4];\n";

}  // namespace

std::string RenderPool2d(const Dialect& d, const std::string& name, DType dtype, bool max,
                         bool backward, bool indices) {
  // The argmax helper takes __global pointers; the dialect spells the qualifier.
  std::string argmax = kArgMax;
  if (d.global != "__global") {
    for (size_t at = argmax.find("__global"); at != std::string::npos;
         at = argmax.find("__global", at + d.global.size())) {
      argmax.replace(at, 8, d.global);
    }
  }
  const std::string L = d.int64, G = d.global;
  std::string s =
      absl::StrCat(Preamble(d, {dtype}), "#define I64 ", L, "\n#define T ", StorageType(d, dtype),
                   "\n", max ? argmax : "", d.kernel, " ", name, "(", G, " T* out, ");
  if (!backward) {
    if (indices) absl::StrAppend(&s, G, " I64* out_idx, ");
    absl::StrAppend(&s, G, " const T* x, ");
  } else {
    absl::StrAppend(&s, G, " const T* gy, ");
    if (max) absl::StrAppend(&s, G, " const T* x, ");
  }
  absl::StrAppend(&s, G, " const I64* win, ");
  if (backward) absl::StrAppend(&s, G, " const I64* lists, ");
  absl::StrAppend(&s,
                  "const I64 n, const I64 out_plane, const I64 width, const I64 in_plane, const "
                  "I64 dh, const I64 dw) {\n  const I64 i = ",
                  d.global_id, ";\n  if (i >= n) return;\n");
  if (!backward) {
    absl::StrAppend(&s, "  const I64 o = i % out_plane;\n  " + G +
                            " const T* p = x + i / out_plane * "
                            "in_plane;\n");
    if (max) {
      absl::StrAppend(&s,
                      "  const I64 at = td_argmax(p, win, o, width, dh, dw);\n  out[i] = p[at];\n",
                      indices ? "  out_idx[i] = at;\n" : "");
    } else {
      absl::StrAppend(&s, kAvgForward);
    }
  } else {
    absl::StrAppend(&s,
                    "  const I64 pos = i % in_plane, pl = i / in_plane;\n  T acc = 0;\n"
                    "  for (I64 k = lists[pos]; k < lists[pos + 1]; ++k) {\n"
                    "    const I64 o = lists[k];\n",
                    max ? "    if (td_argmax(x + pl * in_plane, win, o, width, dh, dw) == pos) acc "
                          "+= gy[pl * out_plane + o];\n"
                        : "    acc += gy[pl * out_plane + o] / (T)win[o * 5 + 4];\n",
                    "  }\n  out[i] = acc;\n");
  }
  absl::StrAppend(&s, "}\n");
  return s;
}

}  // namespace tensord::gpu
