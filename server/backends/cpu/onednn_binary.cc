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
#include <memory>
#include <optional>
#include <string>
#include <utility>

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

// The operand order and padded dims of a binary call oneDNN runs with one primitive (its
// first source of the output's shape), or nullopt for a call it does not take.
struct BinaryPlan {
  bool swapped = false;
  memory::desc m0, m1, md;
};

std::optional<BinaryPlan> PlanBinary(const BinarySpec& spec, const Shape& a, const Shape& b,
                                     const TensorMeta& out) {
  if (out.dtype != DType::kF32 || NumElements(out.shape) < kMinElementwiseSize) return std::nullopt;
  const size_t rank = std::max<size_t>(out.shape.size(), 1);
  if (rank > DNNL_MAX_NDIMS) return std::nullopt;
  memory::dims d0 = Padded(a, rank), d1 = Padded(b, rank);
  const memory::dims dd = Padded(out.shape, rank);
  BinaryPlan p;
  if (d0 != dd) {
    if (!spec.commutative || d1 != dd) return std::nullopt;
    p.swapped = true;
    std::swap(d0, d1);
  }
  p.m0 = PlainDims(d0);
  p.m1 = PlainDims(d1);
  p.md = PlainDims(dd);
  return p;
}

std::shared_ptr<const CachedPrimitive> BinaryPrimitive(const BinarySpec& spec,
                                                       const BinaryPlan& p) {
  return GetPrimitive(
      "binary",
      [&] {
        return absl::StrCat("binary|", static_cast<int>(spec.alg), DescKey(p.m0), DescKey(p.m1));
      },
      [&] {
        dnnl::binary::primitive_desc pd(dnnl::binary::desc(spec.alg, p.m0, p.m1, p.md), Attr(),
                                        Engine());
        const std::string impl = pd.impl_info_str();
        return CachedPrimitive{dnnl::binary(pd), pd, impl.rfind("ref", 0) == 0};
      },
      [&](const CachedPrimitive& prim) {
        return prim.pd.src_desc(0) == p.m0 && prim.pd.src_desc(1) == p.m1;
      });
}

// Whether oneDNN runs the call with an implementation of its own (its reference one is slower
// than the loop kernel); a primitive it cannot make fails when the kernel runs.
bool BinaryAccepts(const BinarySpec& spec, const KernelQuery& q) {
  const std::optional<BinaryPlan> p =
      PlanBinary(spec, q.inputs[0].shape, q.inputs[1].shape, q.outputs[0]);
  if (!p) return false;
  try {
    return !BinaryPrimitive(spec, *p)->reference;
  } catch (const dnnl::error&) {
    return true;
  }
}

absl::Status RunBinary(KernelCall& c, const BinarySpec& spec) {
  Tensor& out = c.outputs[0];
  const std::optional<BinaryPlan> p =
      PlanBinary(spec, c.inputs[0].shape(), c.inputs[1].shape(), out.meta());
  if (!p) return NotPlanned(c);
  auto prim = BinaryPrimitive(spec, *p);
  if (prim->reference) return NotPlanned(c);
  const Tensor& s0 = c.inputs[p->swapped ? 1 : 0];
  const Tensor& s1 = c.inputs[p->swapped ? 0 : 1];
  Execute(*prim, {{DNNL_ARG_SRC_0, Wrap(s0, p->m0)},
                  {DNNL_ARG_SRC_1, Wrap(s1, p->m1)},
                  {DNNL_ARG_DST, Wrap(out, p->md)}});
  return absl::OkStatus();
}

}  // namespace

void RegisterBinaryKernels(KernelTable& t) {
  for (const BinarySpec& spec : BinarySpecs()) {
    t.Add(spec.op,
          Kernel{"onednn_" + spec.op,
                 [spec](absl::Span<const DType> d, const Attrs* a) {
                   return d.size() == 2 && AllF32(d) && (a == nullptr || spec.accepts(*a));
                 },
                 [spec](KernelCall& c) -> absl::Status {
                   return Guard(c.op.name, [&] { return RunBinary(c, spec); });
                 },
                 DTypeSet(), [spec](const KernelQuery& q) { return BinaryAccepts(spec, q); }});
  }
}

}  // namespace tensord::cpu::onednn
