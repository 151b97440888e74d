#include "server/backends/gpu/codegen/kernel_source.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace tensord::gpu {
namespace {

// bf16 and f16 are stored as 16-bit integers and converted by hand, bit for bit as the CPU
// does (common/half.h), so a value moved between devices never changes.
constexpr char kHalfHelpers[] = R"(
float td_bf16_to_f32(ushort b) { return AS_FLOAT(((uint)b) << 16); }
ushort td_f32_to_bf16(float f) {
  const uint u = AS_UINT(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x0040u);
  return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float td_f16_to_f32(ushort h) {
  const uint sign = ((uint)(h & 0x8000u)) << 16;
  const uint e = (h >> 10) & 0x1fu;
  uint mant = h & 0x3ffu;
  if (e == 0x1fu) return AS_FLOAT(sign | 0x7f800000u | (mant << 13));
  if (e != 0u) return AS_FLOAT(sign | ((e + 112u) << 23) | (mant << 13));
  if (mant == 0u) return AS_FLOAT(sign);
  uint x = 113u;
  while ((mant & 0x400u) == 0u) { mant <<= 1; --x; }
  return AS_FLOAT(sign | (x << 23) | ((mant & 0x3ffu) << 13));
}
ushort td_f32_to_f16(float f) {
  const uint u = AS_UINT(f);
  const ushort sign = (ushort)((u >> 16) & 0x8000u);
  const uint a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (ushort)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return (ushort)(sign | 0x7c00u);
  if (a >= 0x38800000u) {
    const uint rebased = a - (112u << 23);
    return (ushort)(sign | ((rebased + 0xfffu + ((rebased >> 13) & 1u)) >> 13));
  }
  const uint shift = 126u - (a >> 23);
  if (shift > 24u) return sign;
  const uint m = (a & 0x7fffffu) | 0x800000u;
  uint q = m >> shift;
  const uint rem = m & ((1u << shift) - 1u);
  const uint halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
  return (ushort)(sign | q);
}
)";

}  // namespace

std::string StorageType(const Dialect& d, DType t) {
  switch (t) {
    case DType::kF32:
      return "float";
    case DType::kF64:
      return "double";
    case DType::kI32:
      return "int";
    case DType::kI64:
      return d.int64;
    case DType::kBool:
      return "uchar";
    case DType::kBF16:
    case DType::kF16:
      return "ushort";
    case DType::kU8:
      return "uchar";
    case DType::kI8:
      return "char";
    case DType::kI16:
      return "short";
  }
  return "float";
}

std::string StorageTag(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kU8:
      return "u8";
    case DType::kBF16:
    case DType::kF16:
      return "u16";
    default:
      return std::string(DTypeName(t));
  }
}

// What an element is computed as: 2-byte floats as float, bool and narrow integers as int.
std::string ComputeType(const Dialect& d, DType t) {
  if (IsLowPrecision(t)) return "float";
  if (t == DType::kBool || IsNarrowInt(t)) return "int";
  return StorageType(d, t);
}

std::string Load(DType t, const std::string& element) {
  if (t == DType::kBF16) return absl::StrCat("td_bf16_to_f32(", element, ")");
  if (t == DType::kF16) return absl::StrCat("td_f16_to_f32(", element, ")");
  if (t == DType::kBool) return absl::StrCat("(int)(", element, " != 0)");
  if (IsNarrowInt(t)) return absl::StrCat("(int)(", element, ")");
  return element;
}

std::string Store(const Dialect& d, DType t, const std::string& value) {
  if (t == DType::kBF16) return absl::StrCat("td_f32_to_bf16((float)(", value, "))");
  if (t == DType::kF16) return absl::StrCat("td_f32_to_f16((float)(", value, "))");
  if (t == DType::kBool) return absl::StrCat("(uchar)((", value, ") != 0)");
  // Through the 64-bit integer, so that a float wraps into a narrow integer as in PyTorch's
  // casts (-1.0 is 255 in u8) and an integer keeps its low bits.
  if (IsNarrowInt(t))
    return absl::StrCat("(", StorageType(d, t), ")((", d.int64, ")(", value, "))");
  return absl::StrCat("(", StorageType(d, t), ")(", value, ")");
}

// Walks the linear index `index` over `shape_at` dims and adds each operand's offset.
std::string OffsetLoop(const std::string& index, const std::string& rank,
                       const std::string& shape_at, const std::vector<std::string>& offsets,
                       const std::vector<std::string>& stride_at, const Dialect& d) {
  std::string s =
      absl::StrCat("  { ", d.int64, " rem = ", index, ";\n    for (int k = ", rank,
                   " - 1; k >= 0; --k) {\n      const ", d.int64, " size = ", shape_at,
                   "k];\n      const ", d.int64, " idx = rem % size;\n      rem /= size;\n");
  for (size_t i = 0; i < offsets.size(); ++i) {
    absl::StrAppend(&s, "      ", offsets[i], " += idx * ", stride_at[i], "k];\n");
  }
  absl::StrAppend(&s, "    } }\n");
  return s;
}

Dialect WithoutFp64(Dialect d) {
  d.wide = "float";
  return d;
}

std::string Preamble(const Dialect& d, const std::vector<DType>& dtypes) {
  bool f64 = false, half = false;
  for (DType t : dtypes) {
    f64 |= t == DType::kF64;
    half |= IsLowPrecision(t);
  }
  std::string out = d.preamble;
  const bool wide_f64 = d.wide == "double";
  if (f64 && wide_f64) absl::StrAppend(&out, d.fp64_enable);
  if (wide_f64) {
    absl::StrAppend(&out, "#define WIDE double\n#define WIDE_ADD(s, c, v) ((s) += (v))\n");
  } else {
    // Kahan's summation; an infinite or NaN sum drops the compensation, so it stays what an
    // uncompensated sum would be.
    absl::StrAppend(&out, "#define WIDE ", d.wide,
                    "\n#define WIDE_ADD(s, c, v) { const WIDE y_ = (WIDE)(v) - (c); "
                    "const WIDE t_ = (s) + y_; (c) = isfinite(t_) ? (t_ - (s)) - y_ : (WIDE)0; "
                    "(s) = t_; }\n");
  }
  if (half) {
    absl::StrAppend(&out, absl::StrReplaceAll(kHalfHelpers,
                                              {{"AS_FLOAT", d.as_float}, {"AS_UINT", d.as_uint}}));
  }
  return out;
}

std::string MapInputParams(const Dialect& d, const std::vector<DType>& inputs,
                           const std::vector<bool>& by_value) {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i < by_value.size() && by_value[i]) {
      absl::StrAppend(&s, ", const ", StorageType(d, inputs[i]), " in", i);
    } else {
      absl::StrAppend(&s, ", ", d.global, " const ", StorageType(d, inputs[i]), "* in", i);
    }
  }
  absl::StrAppend(&s, ", ", d.global, " const ", d.int64, "* geom, const ", d.int64,
                  " n, const int rank");
  return s;
}

std::string MapLoads(const Dialect& d, const std::vector<DType>& inputs,
                     const std::vector<bool>& by_value, const std::vector<std::string>& names) {
  std::string s =
      absl::StrCat("  const ", d.int64, " i = ", d.global_id, ";\n  if (i >= n) return;\n");
  std::vector<std::string> offsets, strides;
  for (size_t i = 0; i < inputs.size(); ++i) {
    offsets.push_back(absl::StrCat("o", i));
    strides.push_back(absl::StrCat("geom[rank * ", i + 1, " + "));
    absl::StrAppend(&s, "  ", d.int64, " o", i, " = 0;\n");
  }
  if (!inputs.empty()) absl::StrAppend(&s, OffsetLoop("i", "rank", "geom[", offsets, strides, d));
  for (size_t i = 0; i < inputs.size() && i < names.size(); ++i) {
    const std::string element = i < by_value.size() && by_value[i]
                                    ? absl::StrCat("in", i)
                                    : absl::StrCat("in", i, "[o", i, "]");
    absl::StrAppend(&s, "  const T ", names[i], " = (T)(", Load(inputs[i], element), ");\n");
  }
  return s;
}

std::string RenderElementwise(const Dialect& d, const ElementwiseKernel& k) {
  std::vector<DType> all = k.inputs;
  all.push_back(k.output);
  all.push_back(k.compute);
  if (!k.helpers.empty()) all.push_back(DType::kF64);
  const std::string T = ComputeType(d, k.compute);
  std::string s = Preamble(d, all);
  // UT: the unsigned type of an integer T, for arithmetic that wraps.
  const std::string UT = k.compute == DType::kI64 ? d.uint64 : "uint";
  absl::StrAppend(&s, k.helpers, "#define T ", T, "\n#define UT ", UT, "\n", d.kernel, " ", k.name,
                  "(", d.global, " ", StorageType(d, k.output), "* out",
                  MapInputParams(d, k.inputs, k.by_value));
  for (int i = 0; i < k.num_scalars; ++i) absl::StrAppend(&s, ", const T s", i);
  absl::StrAppend(&s, ") {\n", MapLoads(d, k.inputs, k.by_value, {"a", "b", "c", "d"}));
  absl::StrAppend(&s, "  out[i] = ", Store(d, k.output, absl::StrCat("(", k.expr, ")")), ";\n}\n");
  return s;
}

std::string RenderAnyZero(const Dialect& d, const std::string& name, DType dtype) {
  return absl::StrCat(Preamble(d, {dtype}), d.kernel, " ", name, "(", d.global, " int* flag, ",
                      d.global, " const ", StorageType(d, dtype), "* x, const ", d.int64,
                      " n) {\n  const ", d.int64, " i = ", d.global_id,
                      ";\n  if (i < n && x[i] == 0) flag[0] = 1;\n}\n");
}

std::vector<int64_t> Geometry::Flat() const {
  std::vector<int64_t> out = shape;
  for (const auto& s : strides) out.insert(out.end(), s.begin(), s.end());
  return out;
}

Geometry StridedGeometry(const Shape& shape, std::vector<std::vector<int64_t>> strides) {
  Geometry g;
  // Size-1 dimensions walk nothing; the rest merge with their inner neighbour when every
  // operand steps over that neighbour exactly (outer stride = inner stride * inner size).
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!g.shape.empty()) {
      bool merge = true;
      for (size_t o = 0; o < strides.size() && merge; ++o) {
        merge = g.strides[o].back() == strides[o][d] * shape[d];
      }
      if (merge) {
        g.shape.back() *= shape[d];
        for (size_t o = 0; o < strides.size(); ++o) g.strides[o].back() = strides[o][d];
        continue;
      }
    }
    g.shape.push_back(shape[d]);
    g.strides.resize(strides.size());
    for (size_t o = 0; o < strides.size(); ++o) g.strides[o].push_back(strides[o][d]);
  }
  g.strides.resize(strides.size());
  return g;
}

Geometry BroadcastGeometry(const Shape& out, const std::vector<Shape>& inputs) {
  std::vector<std::vector<int64_t>> strides;
  for (const Shape& in : inputs) strides.push_back(BroadcastStrides(in, out));
  return StridedGeometry(out, std::move(strides));
}

ReductionGeometry ReduceGeometry(const Shape& in, const std::vector<int64_t>& dims) {
  const std::vector<int64_t> strides = ContiguousStrides(in);
  Shape kept_shape, reduced_shape;
  std::vector<int64_t> kept_strides, reduced_strides;
  for (size_t d = 0; d < in.size(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    (reduced ? reduced_shape : kept_shape).push_back(in[d]);
    (reduced ? reduced_strides : kept_strides).push_back(strides[d]);
  }
  return {StridedGeometry(kept_shape, {kept_strides}),
          StridedGeometry(reduced_shape, {reduced_strides})};
}

}  // namespace tensord::gpu
