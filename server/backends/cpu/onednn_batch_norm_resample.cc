// oneDNN kernels of the f32 batch normalization and resampling ops: batch normalization
// forward (batch or given statistics) and backward, nearest/linear resampling forward and
// backward. Tensors are row-major [N, C, *] and wrapped in place. Calls oneDNN cannot
// reproduce exactly are refused when planned, so the loop kernels run them: empty tensors, and
// resampling whose PyTorch index formula differs from oneDNN's (align_corners, a scale_factor that
// is not out/in, nearest except integer upsampling, where both pick floor(dst * in / out)).
#include <cmath>
#include <vector>

#include "absl/strings/str_join.h"
#include "server/backends/cpu/onednn_common.h"

namespace tensord::cpu {
absl::Status LoopBatchNorm(KernelCall& c);          // nn_batch_norm_kernels.cc
absl::Status LoopBatchNormBackward(KernelCall& c);  // nn_batch_norm_kernels.cc
// Per-channel mean and biased variance of f32 [N, C, *], accumulated in double.
void BatchNormMoments(const Tensor& x, float* mean, float* var);  // nn_batch_norm_kernels.cc
}  // namespace tensord::cpu

namespace tensord::cpu::onednn {
namespace {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using Flags = dnnl::normalization_flags;

// ---- batch normalization ----------------------------------------------------------------------

struct BatchNormSetup {
  memory::desc data, stat;
  float eps;
  Flags flags;
  bool training;
  std::string Key() const { return absl::StrCat(DescKey(data), "|", eps, "|", training); }
};

BatchNormSetup SetupBatchNorm(const Shape& x, const Attrs& a) {
  int64_t inner = 1;
  for (size_t d = 2; d < x.size(); ++d) inner *= x[d];
  BatchNormSetup s;
  // As 4-d NCHW: oneDNN 2.6 has only its reference batch normalization for 3-d data.
  s.data = PlainDesc({x[0], x[1], 1, inner}, DType::kF32);
  s.stat = PlainDesc({x[1]}, DType::kF32);
  s.eps = static_cast<float>(a.GetFloat("eps"));
  const bool training = s.training = a.GetBool("training");
  unsigned f = static_cast<unsigned>(Flags::use_scale) | static_cast<unsigned>(Flags::use_shift);
  if (!training) f |= static_cast<unsigned>(Flags::use_global_stats);
  s.flags = static_cast<Flags>(f);
  return s;
}

// The primitives, with given statistics (forward) or batch ones (backward).
std::shared_ptr<const CachedPrimitive> ForwardPrimitive(const BatchNormSetup& s) {
  return GetPrimitive(
      "bnorm_fwd", [&] { return "bnorm_fwd|" + s.Key(); },
      [&] {
        using F = dnnl::batch_normalization_forward;
        F::primitive_desc pd(F::desc(prop_kind::forward_inference, s.data, s.eps, s.flags), Attr(),
                             Engine());
        return CachedPrimitive{F(pd), pd, IsReference(pd)};
      });
}

std::shared_ptr<const CachedPrimitive> BackwardPrimitive(const BatchNormSetup& s) {
  return GetPrimitive(
      "bnorm_bwd", [&] { return "bnorm_bwd|" + s.Key(); },
      [&] {
        using F = dnnl::batch_normalization_forward;
        using B = dnnl::batch_normalization_backward;
        F::primitive_desc fwd(F::desc(prop_kind::forward_training, s.data, s.eps, s.flags),
                              Engine());
        B::primitive_desc pd(B::desc(prop_kind::backward, s.data, s.data, s.eps, s.flags), Attr(),
                             Engine(), fwd);
        return CachedPrimitive{B(pd), pd, IsReference(pd)};
      });
}

// The forward always normalizes with given statistics (see below).
Attrs WithGivenStatistics(const Attrs& attrs) {
  AttrMap m = attrs.map();
  m["training"] = false;
  return Attrs(std::move(m));
}

// Whether oneDNN has an implementation of its own for the call, not only its reference one
// (slower than the loop kernel). Empty tensors the kernel hands to the loop kernel itself; a
// primitive oneDNN cannot make fails when the kernel runs.
template <bool kBackward>
bool BatchNormAccepts(const KernelQuery& q) {
  const Shape& x = q.inputs[kBackward ? 1 : 0].shape;
  if (NumElements(x) == 0) return true;
  try {
    if (kBackward) return !BackwardPrimitive(SetupBatchNorm(x, *q.attrs))->reference;
    return !ForwardPrimitive(SetupBatchNorm(x, WithGivenStatistics(*q.attrs)))->reference;
  } catch (const dnnl::error&) {
    return true;
  }
}

absl::Status BatchNormForward(KernelCall& c) {
  if (c.inputs[0].numel() == 0) return LoopBatchNorm(c);
  // oneDNN always normalizes with given statistics. Its own batch statistics accumulate in
  // f32, which loses an order of magnitude against PyTorch on data far from zero mean, so
  // training computes them in double first.
  if (c.attrs.GetBool("training")) {
    BatchNormMoments(c.inputs[0], c.outputs[1].data<float>(), c.outputs[2].data<float>());
  } else {
    std::copy(c.inputs[3].data<float>(), c.inputs[3].data<float>() + c.inputs[3].numel(),
              c.outputs[1].data<float>());
    std::copy(c.inputs[4].data<float>(), c.inputs[4].data<float>() + c.inputs[4].numel(),
              c.outputs[2].data<float>());
  }
  const BatchNormSetup s = SetupBatchNorm(c.inputs[0].shape(), WithGivenStatistics(c.attrs));
  auto prim = ForwardPrimitive(s);
  if (prim->reference) return NotPlanned(c);
  Execute(*prim, {{DNNL_ARG_SRC, Wrap(c.inputs[0], s.data)},
                  {DNNL_ARG_DST, Wrap(c.outputs[0], s.data)},
                  {DNNL_ARG_SCALE, Wrap(c.inputs[1], s.stat)},
                  {DNNL_ARG_SHIFT, Wrap(c.inputs[2], s.stat)},
                  {DNNL_ARG_MEAN, Wrap(c.outputs[1], s.stat)},
                  {DNNL_ARG_VARIANCE, Wrap(c.outputs[2], s.stat)}});
  return absl::OkStatus();
}

absl::Status BatchNormBackward(KernelCall& c) {
  if (c.inputs[1].numel() == 0) return LoopBatchNormBackward(c);
  const BatchNormSetup s = SetupBatchNorm(c.inputs[1].shape(), c.attrs);
  auto prim = BackwardPrimitive(s);
  if (prim->reference) return NotPlanned(c);
  // oneDNN 2.6 wants a shift bound whenever use_shift is set, though backward does not read it.
  std::vector<float> shift(c.inputs[1].dim(1), 0.0f);
  Execute(*prim, {{DNNL_ARG_DIFF_DST, Wrap(c.inputs[0], s.data)},
                  {DNNL_ARG_SRC, Wrap(c.inputs[1], s.data)},
                  {DNNL_ARG_SCALE, Wrap(c.inputs[2], s.stat)},
                  {DNNL_ARG_SHIFT, WrapPtr(shift.data(), s.stat)},
                  {DNNL_ARG_MEAN, Wrap(c.inputs[3], s.stat)},
                  {DNNL_ARG_VARIANCE, Wrap(c.inputs[4], s.stat)},
                  {DNNL_ARG_DIFF_SRC, Wrap(c.outputs[0], s.data)},
                  {DNNL_ARG_DIFF_SCALE, Wrap(c.outputs[1], s.stat)},
                  {DNNL_ARG_DIFF_SHIFT, Wrap(c.outputs[2], s.stat)}});
  return absl::OkStatus();
}

// ---- resampling -------------------------------------------------------------------------------

// Whether oneDNN's index formula gives PyTorch's for this (input, output) geometry.
bool ResampleMatches(const Shape& in, const Shape& out, const Attrs& a) {
  if (in[0] * in[1] == 0) return false;
  const bool linear = a.GetString("mode") == "linear";
  if (linear && a.GetBool("align_corners")) return false;
  const std::vector<double> scales = a.GetFloats("scales");
  for (size_t d = 2; d < in.size(); ++d) {
    const double scale = scales[d - 2];
    // PyTorch uses 1 / scale_factor where one was given; oneDNN always in / out.
    if (scale > 0 && static_cast<double>(in[d]) * scale != static_cast<double>(out[d])) {
      return false;
    }
    if (!linear && out[d] % in[d] != 0) return false;
  }
  return true;
}

algorithm ResampleAlgorithm(const Attrs& a) {
  return a.GetString("mode") == "linear" ? algorithm::resampling_linear
                                         : algorithm::resampling_nearest;
}

dnnl::resampling_forward::primitive_desc ResampleForwardPd(const memory::desc& src,
                                                           const memory::desc& dst, const Attrs& a,
                                                           const dnnl::primitive_attr& attr) {
  using F = dnnl::resampling_forward;
  return F::primitive_desc(F::desc(prop_kind::forward_training, ResampleAlgorithm(a), src, dst),
                           attr, Engine());
}

absl::Status UpsampleForward(KernelCall& c) {
  const Shape& in = c.inputs[0].shape();
  const Shape& out = c.outputs[0].shape();
  if (!ResampleMatches(in, out, c.attrs)) return NotPlanned(c);
  const memory::desc src = PlainDesc(in, DType::kF32), dst = PlainDesc(out, DType::kF32);
  auto prim = GetPrimitive(
      "resample_fwd",
      [&] {
        return absl::StrCat("resample_fwd|", c.attrs.GetString("mode"), DescKey(src), DescKey(dst));
      },
      [&] {
        auto pd = ResampleForwardPd(src, dst, c.attrs, Attr());
        return CachedPrimitive{dnnl::resampling_forward(pd), pd};
      });
  Execute(*prim, {{DNNL_ARG_SRC, Wrap(c.inputs[0], src)}, {DNNL_ARG_DST, Wrap(c.outputs[0], dst)}});
  return absl::OkStatus();
}

absl::Status UpsampleBackward(KernelCall& c) {
  const Shape& in = c.outputs[0].shape();
  const Shape& out = c.inputs[0].shape();
  if (!ResampleMatches(in, out, c.attrs)) return NotPlanned(c);
  const memory::desc src = PlainDesc(in, DType::kF32), dst = PlainDesc(out, DType::kF32);
  auto prim = GetPrimitive(
      "resample_bwd",
      [&] {
        return absl::StrCat("resample_bwd|", c.attrs.GetString("mode"), DescKey(src), DescKey(dst));
      },
      [&] {
        using B = dnnl::resampling_backward;
        B::primitive_desc pd(B::desc(ResampleAlgorithm(c.attrs), src, dst), Attr(), Engine(),
                             ResampleForwardPd(src, dst, c.attrs, dnnl::primitive_attr()));
        return CachedPrimitive{B(pd), pd};
      });
  Execute(*prim, {{DNNL_ARG_DIFF_DST, Wrap(c.inputs[0], dst)},
                  {DNNL_ARG_DIFF_SRC, Wrap(c.outputs[0], src)}});
  return absl::OkStatus();
}

}  // namespace

// Called from RegisterNnKernels (onednn_nn.cc).
void RegisterBatchNormResampleKernels(KernelTable& t) {
  AddF32Kernel(t, "native_batch_norm", BatchNormForward, BatchNormAccepts<false>);
  AddF32Kernel(t, "native_batch_norm_backward", BatchNormBackward, BatchNormAccepts<true>);
  AddF32Kernel(t, "upsample", UpsampleForward, [](const KernelQuery& q) {
    return ResampleMatches(q.inputs[0].shape, q.outputs[0].shape, *q.attrs);
  });
  AddF32Kernel(t, "upsample_backward", UpsampleBackward, [](const KernelQuery& q) {
    return ResampleMatches(q.outputs[0].shape, q.inputs[0].shape, *q.attrs);
  });
}

}  // namespace tensord::cpu::onednn
