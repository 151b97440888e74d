#include "server/backends/gpu/codegen/conv_source.h"

#include "absl/strings/str_cat.h"

namespace tensord::gpu {
namespace {

constexpr char kSizes[] =
    "  const I64 N = geom[0], G = geom[1], XC = geom[2], YC = geom[3], CIN = geom[4],\n"
    "            COUT = geom[5];\n"
    "  const I64 XD = geom[6], XH = geom[7], XW = geom[8], YD = geom[9], YH = geom[10],\n"
    "            YW = geom[11], KD = geom[12], KH = geom[13], KW = geom[14];\n"
    "  const I64 SD = geom[15], SH = geom[16], SW = geom[17], PD = geom[18], PH = geom[19],\n"
    "            PW = geom[20], DD = geom[21], DH = geom[22], DW = geom[23];\n"
    "  const I64 XP = XD * XH * XW, YP = YD * YH * YW, TAPS = KD * KH * KW;\n";

// An element of y: bias + over (ic, taps) x * w.
constexpr char kWriteY[] =
    "  const I64 ow = i % YW, oh = i / YW % YH, od = i / (YW * YH) % YD;\n"
    "  const I64 oc = i / YP % YC, n = i / (YP * YC), grp = oc / COUT;\n"
    "  T acc = BIAS(oc);\n"
    "  for (I64 ic = 0; ic < CIN; ++ic) {\n"
    "    const I64 xbase = (n * XC + grp * CIN + ic) * XP, wbase = (oc * CIN + ic) * TAPS;\n"
    "    for (I64 ka = 0; ka < KD; ++ka) {\n"
    "      const I64 id = od * SD - PD + ka * DD;\n"
    "      if (id < 0 || id >= XD) continue;\n"
    "      for (I64 kb = 0; kb < KH; ++kb) {\n"
    "        const I64 ih = oh * SH - PH + kb * DH;\n"
    "        if (ih < 0 || ih >= XH) continue;\n"
    "        for (I64 ke = 0; ke < KW; ++ke) {\n"
    "          const I64 iw = ow * SW - PW + ke * DW;\n"
    "          if (iw < 0 || iw >= XW) continue;\n"
    "          acc += a[xbase + (id * XH + ih) * XW + iw] * b[wbase + (ka * KH + kb) * KW + ke];\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  out[i] = acc;\n";

// The taps that read element (id, ih, iw) of x, from the last to the first so that the y
// elements (td / SD, th / SH, tw / SW) come in ascending order, as the CPU's loop adds them.
// Three loops, closed by kEndTapsOfX.
constexpr char kTapsOfX[] =
    "  for (I64 ka = KD - 1; ka >= 0; --ka) {\n"
    "    const I64 td = id + PD - ka * DD;\n"
    "    if (td < 0 || td % SD != 0 || td / SD >= YD) continue;\n"
    "    for (I64 kb = KH - 1; kb >= 0; --kb) {\n"
    "      const I64 th = ih + PH - kb * DH;\n"
    "      if (th < 0 || th % SH != 0 || th / SH >= YH) continue;\n"
    "      for (I64 ke = KW - 1; ke >= 0; --ke) {\n"
    "        const I64 tw = iw + PW - ke * DW;\n"
    "        if (tw < 0 || tw % SW != 0 || tw / SW >= YW) continue;\n";
constexpr char kEndTapsOfX[] = "  }}}\n";

// An element of x: bias + over the y elements whose taps read it, y * w.
std::string WriteX() {
  return absl::StrCat(
      "  const I64 iw = i % XW, ih = i / XW % XH, id = i / (XW * XH) % XD;\n"
      "  const I64 c = i / XP % XC, n = i / (XP * XC), grp = c / CIN, ic = c % CIN;\n"
      "  T acc = BIAS(c);\n"
      "  for (I64 oc = grp * COUT; oc < (grp + 1) * COUT; ++oc) {\n"
      "    const I64 ybase = (n * YC + oc) * YP, wbase = (oc * CIN + ic) * TAPS;\n",
      kTapsOfX,
      "          acc += a[ybase + (td / SD * YH + th / SH) * YW + tw / SW] *\n"
      "                 b[wbase + (ka * KH + kb) * KW + ke];\n",
      kEndTapsOfX, "  }\n  out[i] = acc;\n");
}

// An element of w: over (n, output positions) y * x.
constexpr char kWriteW[] =
    "  const I64 ke = i % KW, kb = i / KW % KH, ka = i / (KW * KH) % KD;\n"
    "  const I64 ic = i / TAPS % CIN, oc = i / (TAPS * CIN), grp = oc / COUT;\n"
    "  T acc = 0;\n"
    "  for (I64 n = 0; n < N; ++n) {\n"
    "    const I64 xbase = (n * XC + grp * CIN + ic) * XP, ybase = (n * YC + oc) * YP;\n"
    "    for (I64 od = 0; od < YD; ++od) {\n"
    "      const I64 id = od * SD - PD + ka * DD;\n"
    "      if (id < 0 || id >= XD) continue;\n"
    "      for (I64 oh = 0; oh < YH; ++oh) {\n"
    "        const I64 ih = oh * SH - PH + kb * DH;\n"
    "        if (ih < 0 || ih >= XH) continue;\n"
    "        for (I64 ow = 0; ow < YW; ++ow) {\n"
    "          const I64 iw = ow * SW - PW + ke * DW;\n"
    "          if (iw < 0 || iw >= XW) continue;\n"
    "          acc += a[ybase + (od * YH + oh) * YW + ow] * b[xbase + (id * XH + ih) * XW + iw];\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  out[i] = acc;\n";

// The head every kernel here shares: its dtype, the integer type, the parameters given and
// the item's index `i`, returning past n.
std::string Head(const Dialect& d, const std::string& name, DType dtype,
                 const std::string& params) {
  return absl::StrCat(Preamble(d, {dtype}), "#define I64 ", d.int64, "\n#define T ",
                      StorageType(d, dtype), "\n", d.kernel, " ", name, "(", params, d.global,
                      " const I64* geom, ");
}

std::string Body(const Dialect& d, const std::string& scalars, const std::string& body) {
  return absl::StrCat(scalars, "const I64 n_items) {\n  const I64 i = ", d.global_id,
                      ";\n  if (i >= n_items) return;\n", kSizes, body, "}\n");
}

// The column entries of channel c at output position p of image k, one per tap (an item per
// position, as Caffe's im2col: neighbouring items write neighbouring entries).
constexpr char kColumns[] =
    "  const I64 p = i % YP, c = i / YP % XC, k = i / (YP * XC);\n"
    "  const I64 ow = p % YW, oh = p / YW % YH, od = p / (YW * YH);\n"
    "  const I64 xbase = ((n0 + k) * XC + c) * XP;\n"
    "  I64 at = c * TAPS * row_stride + k * image_stride + p;\n"
    "  for (I64 ka = 0; ka < KD; ++ka) {\n"
    "    const I64 id = od * SD - PD + ka * DD;\n"
    "    for (I64 kb = 0; kb < KH; ++kb) {\n"
    "      const I64 ih = oh * SH - PH + kb * DH;\n"
    "      for (I64 ke = 0; ke < KW; ++ke, at += row_stride) {\n"
    "        const I64 iw = ow * SW - PW + ke * DW;\n"
    "        const int inside = id >= 0 && id < XD && ih >= 0 && ih < XH && iw >= 0 && iw < XW;\n"
    "        cols[at] = inside ? x[xbase + (id * XH + ih) * XW + iw] : (T)0;\n"
    "      }\n"
    "    }\n"
    "  }\n";

// An element of x from the columns of its image, its taps in WriteX's order.
std::string FromColumns() {
  return absl::StrCat(
      "  const I64 iw = i % XW, ih = i / XW % XH, id = i / (XW * XH) % XD;\n"
      "  const I64 c = i / XP % XC, k = i / (XP * XC);\n"
      "  const I64 base = (k * XC + c) * TAPS * YP;\n"
      "  T acc = 0;\n",
      kTapsOfX,
      "        acc += cols[base + ((ka * KH + kb) * KW + ke) * YP +\n"
      "                    (td / SD * YH + th / SH) * YW + tw / SW];\n",
      kEndTapsOfX, "  x[n0 * XC * XP + i] = acc;\n");
}

}  // namespace

std::string RenderConvColumns(const Dialect& d, const std::string& name, DType dtype) {
  return absl::StrCat(
      Head(d, name, dtype, absl::StrCat(d.global, " T* cols, ", d.global, " const T* x, ")),
      Body(d, "const I64 n0, const I64 row_stride, const I64 image_stride, ", kColumns));
}

std::string RenderConvFromColumns(const Dialect& d, const std::string& name, DType dtype) {
  return absl::StrCat(
      Head(d, name, dtype, absl::StrCat(d.global, " T* x, ", d.global, " const T* cols, ")),
      Body(d, "const I64 n0, ", FromColumns()));
}

std::string RenderConvChannelsFirst(const Dialect& d, const std::string& name, DType dtype) {
  return absl::StrCat(
      Head(d, name, dtype, absl::StrCat(d.global, " T* out, ", d.global, " const T* y, ")),
      Body(d, "const I64 n0, const I64 nc, ",
           "  const I64 p = i % YP, k = i / YP % nc, c = i / (YP * nc);\n"
           "  out[i] = y[((n0 + k) * YC + c) * YP + p];\n"));
}

std::string RenderConv(const Dialect& d, const std::string& name, DType dtype, ConvPass pass,
                       bool bias) {
  std::string params =
      absl::StrCat(d.global, " T* out, ", d.global, " const T* a, ", d.global, " const T* b, ");
  if (bias) absl::StrAppend(&params, d.global, " const T* bias, ");
  return absl::StrCat("#define BIAS(ch) ", bias ? "bias[ch]" : "(T)0", "\n",
                      Head(d, name, dtype, params),
                      Body(d, "",
                           pass == ConvPass::kY   ? std::string(kWriteY)
                           : pass == ConvPass::kX ? WriteX()
                                                  : std::string(kWriteW)));
}

std::vector<int64_t> CorrelationFlat(const nn::Correlation& g) {
  std::vector<int64_t> out = {g.n, g.groups, g.xc, g.yc, g.cin_g, g.cout_g};
  for (const int64_t* v : {g.xs, g.ys, g.k, g.stride, g.pad, g.dil})
    out.insert(out.end(), v, v + 3);
  return out;
}

}  // namespace tensord::gpu
