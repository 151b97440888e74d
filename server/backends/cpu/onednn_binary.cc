// oneDNN f32 kernels for broadcasting binary arithmetic (binary primitive). IEEE arithmetic
// makes add, sub, mul and div identical to the loops. Not registered: maximum / minimum, whose
// oneDNN 2.6 version returns the second operand when the first is NaN (PyTorch propagates
// NaN). Calls oneDNN can only serve with its slow reference code (a broadcast first operand of a
// non-commutative op, unusual broadcast patterns) are handed on to the loop kernels.
//
// No oneDNN reduction kernels either: oneDNN 2.6's sum / mean accumulate in f32 lanes and lose
// small terms next to large ones (1e7 + 100000 * 0.25 comes out 1563 short), where PyTorch's
// cascade sum and the loop kernels' double accumulator do not; its max / min drop NaNs.
#include <algorithm>

#include "server/backends/cpu/onednn_common.h"

namespace tensord::cpu::onednn {
namespace {

using dnnl::algorithm;
using dnnl::memory;

struct BinarySpec {
  std::string op;
  algorithm alg;
  bool commutative;
  std::function<bool(const Attrs&)> accepts;
};

std::vector<BinarySpec> BinarySpecs() {
  auto unit_alpha = [](const Attrs& a) { return a.GetFloat("alpha") == 1.0; };
  return {{"add", algorithm::binary_add, true, unit_alpha},
          {"sub", algorithm::binary_sub, false, unit_alpha},
          {"mul", algorithm::binary_mul, true, [](const Attrs&) { return true; }},
          {"div", algorithm::binary_div, false,
           [](const Attrs& a) { return !a.Has("rounding_mode"); }}};
}

// `shape` left-padded with 1s to `rank` dims (oneDNN wants equal ranks; 0-d becomes [1]).
memory::dims Padded(const Shape& shape, size_t rank) {
  memory::dims d(rank - shape.size(), 1);
  d.insert(d.end(), shape.begin(), shape.end());
  return d;
}

memory::desc PlainDims(const memory::dims& dims) {
  return PlainDesc(Shape(dims.begin(), dims.end()), DType::kF32);
}

absl::Status RunBinary(KernelCall& c, const BinarySpec& spec) {
  Tensor& out = c.outputs[0];
  const std::string self = "onednn_" + spec.op;
  if (out.dtype() != DType::kF32) return HandOn(c, self);
  if (out.numel() < kMinElementwiseSize) return HandOn(c, self);
  const size_t rank = std::max<size_t>(out.rank(), 1);
  if (rank > DNNL_MAX_NDIMS) return HandOn(c, self);
  const Tensor* s0 = &c.inputs[0];
  const Tensor* s1 = &c.inputs[1];
  memory::dims d0 = Padded(s0->shape(), rank), d1 = Padded(s1->shape(), rank);
  const memory::dims dd = Padded(out.shape(), rank);
  if (d0 != dd) {
    if (!spec.commutative || d1 != dd) return HandOn(c, self);
    std::swap(s0, s1);
    std::swap(d0, d1);
  }
  const memory::desc m0 = PlainDims(d0), m1 = PlainDims(d1), md = PlainDims(dd);
  auto prim = GetPrimitive(
      absl::StrCat("binary|", static_cast<int>(spec.alg), DescKey(m0), DescKey(m1)), [&] {
        dnnl::binary::primitive_desc pd(dnnl::binary::desc(spec.alg, m0, m1, md), Attr(), Engine());
        const std::string impl = pd.impl_info_str();
        return CachedPrimitive{dnnl::binary(pd), pd, impl.rfind("ref", 0) == 0};
      });
  if (prim->reference) return HandOn(c, self);
  Execute(*prim, {{DNNL_ARG_SRC_0, Wrap(*s0, m0)},
                  {DNNL_ARG_SRC_1, Wrap(*s1, m1)},
                  {DNNL_ARG_DST, Wrap(out, md)}});
  return absl::OkStatus();
}

}  // namespace

void RegisterBinaryKernels(KernelTable& t) {
  for (const BinarySpec& spec : BinarySpecs()) {
    t.Add(spec.op, Kernel{"onednn_" + spec.op,
                          [spec](absl::Span<const DType> d, const Attrs* a) {
                            return d.size() == 2 && AllF32(d) && (a == nullptr || spec.accepts(*a));
                          },
                          [spec](KernelCall& c) -> absl::Status {
                            return Guard(c.op.name, [&] { return RunBinary(c, spec); });
                          }});
  }
}

}  // namespace tensord::cpu::onednn
