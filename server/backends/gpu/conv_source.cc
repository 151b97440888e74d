#include "server/backends/gpu/conv_source.h"

#include "absl/strings/str_cat.h"

namespace tensord::gpu {
namespace {

// The names every pass reads from the geometry.
constexpr char kSizes[] =
    "  const I64 N = geom[0], C = geom[1], H = geom[2], W = geom[3], OC = geom[4], OH = geom[5],\n"
    "            OW = geom[6], KH = geom[7], KW = geom[8], G = geom[9];\n"
    "  const I64 SH = geom[10], SW = geom[11], PH = geom[12], PW = geom[13], DH = geom[14],\n"
    "            DW = geom[15];\n"
    "  const I64 CIN = C / G, COUT = OC / G;\n";

// y[n, oc, oh, ow] = bias + sum over (ic, i, j) of x * w.
constexpr char kForward[] =
    "  const I64 ow = i % OW, oh = i / OW % OH, oc = i / (OW * OH) % OC, n = i / (OW * OH * OC);\n"
    "  const I64 g = oc / COUT;\n"
    "  T acc = BIAS;\n"
    "  for (I64 ic = 0; ic < CIN; ++ic) {\n"
    "    const I64 c = g * CIN + ic;\n"
    "    for (I64 ki = 0; ki < KH; ++ki) {\n"
    "      const I64 ih = oh * SH - PH + ki * DH;\n"
    "      if (ih < 0 || ih >= H) continue;\n"
    "      for (I64 kj = 0; kj < KW; ++kj) {\n"
    "        const I64 iw = ow * SW - PW + kj * DW;\n"
    "        if (iw < 0 || iw >= W) continue;\n"
    "        acc += a[((n * C + c) * H + ih) * W + iw] * b[((oc * CIN + ic) * KH + ki) * KW + "
    "kj];\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  out[i] = acc;\n";

// gx[n, c, ih, iw] = sum over the outputs whose taps read it of gy * w. Taps run from the last
// to the first so the outputs come in ascending order, as the CPU's loop adds them.
constexpr char kInputGrad[] =
    "  const I64 iw = i % W, ih = i / W % H, c = i / (W * H) % C, n = i / (W * H * C);\n"
    "  const I64 g = c / CIN, ic = c % CIN;\n"
    "  T acc = 0;\n"
    "  for (I64 oc = g * COUT; oc < (g + 1) * COUT; ++oc) {\n"
    "    for (I64 ki = KH - 1; ki >= 0; --ki) {\n"
    "      const I64 th = ih + PH - ki * DH;\n"
    "      if (th < 0 || th % SH != 0 || th / SH >= OH) continue;\n"
    "      const I64 oh = th / SH;\n"
    "      for (I64 kj = KW - 1; kj >= 0; --kj) {\n"
    "        const I64 tw = iw + PW - kj * DW;\n"
    "        if (tw < 0 || tw % SW != 0 || tw / SW >= OW) continue;\n"
    "        const I64 ow = tw / SW;\n"
    "        acc += a[((n * OC + oc) * OH + oh) * OW + ow] * b[((oc * CIN + ic) * KH + ki) * KW + "
    "kj];\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  out[i] = acc;\n";

// gw[oc, ic, ki, kj] = sum over (n, oh, ow) of gy * x.
constexpr char kWeightGrad[] =
    "  const I64 kj = i % KW, ki = i / KW % KH, ic = i / (KW * KH) % CIN, oc = i / (KW * KH * "
    "CIN);\n"
    "  const I64 c = oc / COUT * CIN + ic;\n"
    "  T acc = 0;\n"
    "  for (I64 n = 0; n < N; ++n) {\n"
    "    for (I64 oh = 0; oh < OH; ++oh) {\n"
    "      const I64 ih = oh * SH - PH + ki * DH;\n"
    "      if (ih < 0 || ih >= H) continue;\n"
    "      for (I64 ow = 0; ow < OW; ++ow) {\n"
    "        const I64 iw = ow * SW - PW + kj * DW;\n"
    "        if (iw < 0 || iw >= W) continue;\n"
    "        acc += a[((n * OC + oc) * OH + oh) * OW + ow] * b[((n * C + c) * H + ih) * W + iw];\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  out[i] = acc;\n";

}  // namespace

std::string RenderConv2d(const Dialect& d, const std::string& name, DType dtype, ConvPass pass,
                         bool bias) {
  const std::string T = StorageType(d, dtype);
  std::string s = absl::StrCat(Preamble(d, {dtype}), "#define I64 ", d.int64, "\n#define T ", T,
                               "\n", d.kernel, " ", name, "(", d.global, " T* out, ", d.global,
                               " const T* a, ", d.global, " const T* b, ");
  if (bias) absl::StrAppend(&s, d.global, " const T* bias, ");
  absl::StrAppend(&s, d.global,
                  " const I64* geom, const I64 n_out) {\n  const I64 i = ", d.global_id,
                  ";\n  if (i >= n_out) return;\n", kSizes);
  switch (pass) {
    case ConvPass::kForward:
      absl::StrAppend(&s, "#define BIAS ", bias ? "bias[oc]" : "(T)0", "\n", kForward);
      break;
    case ConvPass::kInputGrad:
      absl::StrAppend(&s, kInputGrad);
      break;
    case ConvPass::kWeightGrad:
      absl::StrAppend(&s, kWeightGrad);
      break;
  }
  absl::StrAppend(&s, "}\n");
  return s;
}

std::vector<int64_t> ConvSizes::Flat() const {
  return {n,  c,      h,         w,         oc,         oh,         ow,          kh,
          kw, groups, stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1]};
}

}  // namespace tensord::gpu
