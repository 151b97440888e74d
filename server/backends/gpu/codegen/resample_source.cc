#include "server/backends/gpu/codegen/resample_source.h"

#include "absl/strings/str_cat.h"

namespace tensord::gpu {
namespace {

constexpr char kForward[] =
    "  const I64 ID = geom[0], IH = geom[1], IW = geom[2], OD = geom[3], OH = geom[4],\n"
    "            OW = geom[5], NT = geom[6];\n"
    "  const I64 ow = i % OW, oh = i / OW % OH, od = i / (OW * OH) % OD, pl = i / (OW * OH * OD);\n"
    "  const I64 bh = 2 * OD, bw = 2 * (OD + OH);\n"
    "  T acc_d = 0;\n"
    "  for (I64 td = 0; td < NT; ++td) {\n"
    "    const I64 id = idx[2 * od + td];\n"
    "    const T wd = wts[2 * od + td];\n"
    "    T acc_h = 0;\n"
    "    for (I64 th = 0; th < NT; ++th) {\n"
    "      const I64 ih = idx[bh + 2 * oh + th];\n"
    "      const T wh = wts[bh + 2 * oh + th];\n"
    "      const I64 row = ((pl * ID + id) * IH + ih) * IW;\n"
    "      T acc_w = 0;\n"
    "      for (I64 tw = 0; tw < NT; ++tw) {\n"
    "        acc_w += wts[bw + 2 * ow + tw] * x[row + idx[bw + 2 * ow + tw]];\n"
    "      }\n"
    "      acc_h += wh * acc_w;\n"
    "    }\n"
    "    acc_d += wd * acc_h;\n"
    "  }\n"
    "  out[i] = acc_d;\n";

constexpr char kBackward[] =
    "  const I64 ID = geom[0], IH = geom[1], IW = geom[2], OD = geom[3], OH = geom[4],\n"
    "            OW = geom[5], LD = geom[6], LH = geom[7], LW = geom[8];\n"
    "  const I64 iw = i % IW, ih = i / IW % IH, id = i / (IW * IH) % ID, pl = i / (IW * IH * ID);\n"
    "  const I64 bh = 2 * OD, bw = 2 * (OD + OH);\n"
    "  T acc = 0;\n"
    "  for (I64 kd = lists[LD + id]; kd < lists[LD + id + 1]; ++kd) {\n"
    "    const I64 ed = lists[kd], od = ed / 2;\n"
    "    const T wd = wts[ed];\n"
    "    for (I64 kh = lists[LH + ih]; kh < lists[LH + ih + 1]; ++kh) {\n"
    "      const I64 eh = lists[kh], oh = eh / 2;\n"
    "      const T wdh = wd * wts[bh + eh];\n"
    "      for (I64 kw = lists[LW + iw]; kw < lists[LW + iw + 1]; ++kw) {\n"
    "        const I64 ew = lists[kw], ow = ew / 2;\n"
    "        acc += wdh * wts[bw + ew] * gy[((pl * OD + od) * OH + oh) * OW + ow];\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  out[i] = acc;\n";

}  // namespace

std::string RenderUpsample(const Dialect& d, const std::string& name, DType dtype, bool backward) {
  const std::string G = d.global;
  std::string s = absl::StrCat(Preamble(d, {dtype}), "#define I64 ", d.int64, "\n#define T ",
                               StorageType(d, dtype), "\n", d.kernel, " ", name, "(", G,
                               " T* out, ", G, " const T* ", backward ? "gy" : "x", ", ");
  if (!backward) absl::StrAppend(&s, G, " const I64* idx, ");
  absl::StrAppend(&s, G, " const T* wts, ");
  if (backward) absl::StrAppend(&s, G, " const I64* lists, ");
  absl::StrAppend(&s, G, " const I64* geom, const I64 n) {\n  const I64 i = ", d.global_id,
                  ";\n  if (i >= n) return;\n", backward ? kBackward : kForward, "}\n");
  return s;
}

}  // namespace tensord::gpu
