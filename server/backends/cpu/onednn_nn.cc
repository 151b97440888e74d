// oneDNN kernels of the f32 neural-network ops: convolution forward and backward (data and
// weights), max/avg pooling forward and backward, layer normalization forward and backward.
// Tensors are NCHW row-major. Pooling and normalization wrap them in place; convolutions let
// oneDNN choose its blocked layouts (several times faster than its plain-layout GEMM path) and
// reorder operands in and results out around the call.
#include <unordered_map>
#include <vector>

#include "absl/strings/str_join.h"
#include "server/backends/cpu/nn_kernels.h"
#include "server/backends/cpu/onednn_common.h"
#include "server/backends/cpu/onednn_conv.h"
#include "server/backends/cpu/onednn_layout.h"
#include "server/backends/cpu/onednn_workspace_cache.h"
#include "server/ops/nn_geometry.h"

namespace tensord::cpu::onednn {
namespace {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;

memory::desc Nchw(const Shape& s) {
  const nn::Nchw d = nn::AsNchw(s);
  return PlainDesc({d.n, d.c, d.h, d.w}, DType::kF32);
}

std::string Ints(const memory::dims& v) { return absl::StrJoin(v, ","); }

// ---- convolution ------------------------------------------------------------------------------

// conv2d's attributes as a 2-d convolution of the shared set-up (onednn_conv.h).
absl::StatusOr<nn::ConvNdParams> ReadConv2dAsNd(const std::string& op, const Attrs& attrs) {
  return nn::ReadConvNdParams(op, attrs, 2, /*transposed=*/false);
}

absl::Status ConvForward(KernelCall& c) {
  const bool bias = c.inputs.size() == 3;
  if (c.outputs[0].numel() == 0) return absl::OkStatus();
  if (c.inputs[1].numel() == 0) {
    // No input channels: every output is its bias.
    const nn::Nchw y = nn::AsNchw(c.outputs[0].shape());
    float* out = c.outputs[0].data<float>();
    for (int64_t i = 0, n = c.outputs[0].numel(); i < n; ++i) {
      out[i] = bias ? c.inputs[2].data<float>()[(i / (y.h * y.w)) % y.c] : 0.0f;
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(nn::ConvNdParams p, ReadConv2dAsNd("conv2d", c.attrs));
  auto s = MakeConvSetup(c.inputs[0].shape(), c.inputs[1].shape(), c.outputs[0].shape(), p, bias);
  if (!s) return NotPlanned(c);
  RunConvForward(*s, c.inputs[0], c.inputs[1], bias ? &c.inputs[2] : nullptr, c.outputs[0]);
  return absl::OkStatus();
}

// Output channels or an empty batch leave nothing to convolve; the gradient is zero.
bool ZeroFillIfEmpty(const Shape& other, Tensor& out) {
  if (NumElements(other) != 0 && out.numel() != 0) return false;
  std::fill(out.data<float>(), out.data<float>() + out.numel(), 0.0f);
  return true;
}

absl::Status ConvBackwardInput(KernelCall& c) {
  if (ZeroFillIfEmpty(c.inputs[0].shape(), c.outputs[0])) return absl::OkStatus();
  ASSIGN_OR_RETURN(nn::ConvNdParams p, ReadConv2dAsNd("conv2d_backward_input", c.attrs));
  auto s = MakeConvSetup(c.outputs[0].shape(), c.inputs[1].shape(), c.inputs[0].shape(), p, false);
  if (!s) return NotPlanned(c);
  RunConvBackwardData(*s, c.inputs[0], c.inputs[1], c.outputs[0]);
  return absl::OkStatus();
}

absl::Status ConvBackwardWeight(KernelCall& c) {
  if (ZeroFillIfEmpty(c.inputs[0].shape(), c.outputs[0])) return absl::OkStatus();
  ASSIGN_OR_RETURN(nn::ConvNdParams p, ReadConv2dAsNd("conv2d_backward_weight", c.attrs));
  auto s = MakeConvSetup(c.inputs[1].shape(), c.outputs[0].shape(), c.inputs[0].shape(), p, false);
  if (!s) return NotPlanned(c);
  RunConvBackwardWeights(*s, c.inputs[0], c.inputs[1], c.outputs[0]);
  return absl::OkStatus();
}

// ---- pooling ----------------------------------------------------------------------------------

struct PoolSetup {
  memory::desc x, y;
  memory::dims strides, kernel, dilation, pad_l, pad_r;
  algorithm alg;
  bool exact = true;  // false when oneDNN's divisor would differ from PyTorch's
  std::string Key() const {
    return absl::StrCat(static_cast<int>(alg), DescKey(x), DescKey(y), "|", Ints(strides), "|",
                        Ints(kernel), "|", Ints(dilation), "|", Ints(pad_l), "|", Ints(pad_r));
  }
};

absl::StatusOr<PoolSetup> SetupPool(const std::string& op, const Shape& x, const Shape& y,
                                    const Attrs& attrs, bool max_pool) {
  ASSIGN_OR_RETURN(nn::Pool2dParams p, nn::ReadPool2dParams(op, attrs, max_pool));
  PoolSetup s;
  s.x = Nchw(x);
  s.y = Nchw(y);
  const nn::Nchw xd = nn::AsNchw(x), yd = nn::AsNchw(y);
  const int64_t in[2] = {xd.h, xd.w}, out[2] = {yd.h, yd.w};
  bool extended = false;  // a ceil_mode window reaches past the right padding
  for (int i = 0; i < 2; ++i) {
    s.strides.push_back(p.stride[i]);
    s.kernel.push_back(p.kernel[i]);
    s.dilation.push_back(p.dilation[i] - 1);
    s.pad_l.push_back(p.padding[i]);
    const int64_t floor_out =
        nn::PoolOutputSize(in[i], p.kernel[i], p.padding[i], p.stride[i], p.dilation[i], false);
    const int64_t eff = (p.kernel[i] - 1) * p.dilation[i] + 1;
    // oneDNN derives the output size from both paddings; ceil_mode's extra window is padding
    // on the right.
    s.pad_r.push_back(out[i] == floor_out
                          ? p.padding[i]
                          : (out[i] - 1) * p.stride[i] + eff - in[i] - p.padding[i]);
    extended |= out[i] != floor_out;
  }
  const bool include_pad = attrs.GetBool("count_include_pad");
  s.alg = max_pool      ? algorithm::pooling_max
          : include_pad ? algorithm::pooling_avg_include_padding
                        : algorithm::pooling_avg_exclude_padding;
  // PyTorch's count_include_pad divisor clips a window at the right padding, oneDNN's does not.
  if (!max_pool && ((include_pad && extended) || attrs.Has("divisor_override"))) s.exact = false;
  return s;
}

bool HasNan(const Tensor& t) { return MaxMagnitudeBits(t) > kInfinityBits; }

dnnl::pooling_v2_forward::primitive_desc PoolForwardPd(
    const PoolSetup& s, prop_kind kind, const dnnl::primitive_attr& attr = dnnl::primitive_attr()) {
  using F = dnnl::pooling_v2_forward;
  F::desc d(kind, s.alg, s.x, s.y, s.strides, s.kernel, s.dilation, s.pad_l, s.pad_r);
  return F::primitive_desc(d, attr, Engine());
}

absl::Status PoolForward(KernelCall& c, bool max_pool) {
  const std::string& op = c.op.name;
  ASSIGN_OR_RETURN(PoolSetup s,
                   SetupPool(op, c.inputs[0].shape(), c.outputs[0].shape(), c.attrs, max_pool));
  if (!s.exact) return LoopPool2d(c, max_pool);
  // oneDNN's max drops NaNs; PyTorch's max pooling propagates them. Its workspace is no
  // index output either, so return_indices takes the loop too.
  if (max_pool && (HasNan(c.inputs[0]) || c.outputs.size() > 1)) return LoopPool2d(c, max_pool);
  if (c.outputs[0].numel() == 0) return absl::OkStatus();
  if (max_pool) {
    // The training forward, whose argmax workspace is kept for the backward (which would
    // otherwise run this forward again to get it).
    auto prim = GetPrimitive(
        "pool_fwd_train", [&] { return "pool_fwd_train|" + s.Key(); },
        [&] {
          auto pd = PoolForwardPd(s, prop_kind::forward_training, Attr());
          return CachedPrimitive{dnnl::pooling_v2_forward(pd), pd};
        });
    auto ws = std::make_shared<const PooledMemory>(prim->pd.workspace_desc());
    Execute(*prim, {{DNNL_ARG_SRC, Wrap(c.inputs[0], s.x)},
                    {DNNL_ARG_DST, Wrap(c.outputs[0], s.y)},
                    {DNNL_ARG_WORKSPACE, ws->get()}});
    KeepWorkspace(MemoKey("pool_ws", [&] { return "pool|" + s.Key(); }), c.inputs[0],
                  std::move(ws));
    return absl::OkStatus();
  }
  auto prim = GetPrimitive(
      "pool_fwd", [&] { return "pool_fwd|" + s.Key(); },
      [&] {
        auto pd = PoolForwardPd(s, prop_kind::forward_inference, Attr());
        return CachedPrimitive{dnnl::pooling_v2_forward(pd), pd};
      });
  Execute(*prim, {{DNNL_ARG_SRC, Wrap(c.inputs[0], s.x)}, {DNNL_ARG_DST, Wrap(c.outputs[0], s.y)}});
  return absl::OkStatus();
}

absl::Status PoolBackward(KernelCall& c, bool max_pool) {
  const std::string& op = c.op.name;
  ASSIGN_OR_RETURN(PoolSetup s,
                   SetupPool(op, c.inputs[1].shape(), c.inputs[0].shape(), c.attrs, max_pool));
  if (!s.exact) return LoopPool2dBackward(c, max_pool);
  // A workspace kept for this input, as it is now, means its forward found no NaN in it.
  std::shared_ptr<const PooledMemory> ws =
      max_pool ? FindWorkspace(MemoKey("pool_ws", [&] { return "pool|" + s.Key(); }), c.inputs[1])
               : nullptr;
  if (max_pool && ws == nullptr && HasNan(c.inputs[1])) return LoopPool2dBackward(c, max_pool);
  if (c.outputs[0].numel() == 0) return absl::OkStatus();
  auto prim = GetPrimitive(
      "pool_bwd", [&] { return "pool_bwd|" + s.Key(); },
      [&] {
        using B = dnnl::pooling_v2_backward;
        B::desc d(s.alg, s.x, s.y, s.strides, s.kernel, s.dilation, s.pad_l, s.pad_r);
        B::primitive_desc pd(d, Attr(), Engine(), PoolForwardPd(s, prop_kind::forward_training));
        return CachedPrimitive{B(pd), pd};
      });
  Args args = {{DNNL_ARG_DIFF_DST, Wrap(c.inputs[0], s.y)},
               {DNNL_ARG_DIFF_SRC, Wrap(c.outputs[0], s.x)}};
  if (max_pool) {
    // Max pooling's backward routes gradients through the forward's argmax workspace: the one
    // the forward kept for this input, or the forward run again (an input written since, or a
    // workspace evicted).
    if (ws == nullptr) {
      auto fwd = GetPrimitive(
          "pool_bwd_fwd", [&] { return "pool_fwd_train|" + s.Key(); },
          [&] {
            auto pd = PoolForwardPd(s, prop_kind::forward_training, Attr());
            return CachedPrimitive{dnnl::pooling_v2_forward(pd), pd};
          });
      auto fresh = std::make_shared<const PooledMemory>(fwd->pd.workspace_desc());
      PooledMemory dst(s.y);
      Execute(*fwd, {{DNNL_ARG_SRC, Wrap(c.inputs[1], s.x)},
                     {DNNL_ARG_DST, dst.get()},
                     {DNNL_ARG_WORKSPACE, fresh->get()}});
      ws = std::move(fresh);
    }
    args.emplace(DNNL_ARG_WORKSPACE, ws->get());
    Execute(*prim, args);
    return absl::OkStatus();
  }
  Execute(*prim, args);
  return absl::OkStatus();
}

// ---- layer normalization ----------------------------------------------------------------------

struct LayerNormSetup {
  memory::desc data, params;
  float eps;
  std::string Key() const { return absl::StrCat(DescKey(data), "|", eps); }
};

LayerNormSetup SetupLayerNorm(const Tensor& x, const Attrs& attrs, int64_t* rows, int64_t* cols) {
  *cols = NumElements(attrs.GetInts("normalized_shape"));
  *rows = *cols ? x.numel() / *cols : 0;
  LayerNormSetup s;
  s.data = PlainDesc({*rows, *cols}, DType::kF32);
  s.params = PlainDesc({*cols}, DType::kF32);
  s.eps = static_cast<float>(attrs.GetFloat("eps"));
  return s;
}

absl::Status LayerNormForward(KernelCall& c) {
  int64_t rows, cols;
  LayerNormSetup s = SetupLayerNorm(c.inputs[0], c.attrs, &rows, &cols);
  if (rows == 0 || cols == 0) return LoopLayerNorm(c);
  const bool scale = c.inputs.size() > 1, shift = c.inputs.size() > 2;
  const auto flags = static_cast<dnnl::normalization_flags>(
      (scale ? static_cast<unsigned>(dnnl::normalization_flags::use_scale) : 0u) |
      (shift ? static_cast<unsigned>(dnnl::normalization_flags::use_shift) : 0u));
  auto prim = GetPrimitive(
      "lnorm_fwd", [&] { return absl::StrCat("lnorm_fwd|", s.Key(), "|", scale, shift); },
      [&] {
        using F = dnnl::layer_normalization_forward;
        F::primitive_desc pd(F::desc(prop_kind::forward_inference, s.data, s.eps, flags), Attr(),
                             Engine());
        return CachedPrimitive{F(pd), pd};
      });
  Args args = {{DNNL_ARG_SRC, Wrap(c.inputs[0], s.data)},
               {DNNL_ARG_DST, Wrap(c.outputs[0], s.data)}};
  if (scale) args.emplace(DNNL_ARG_SCALE, Wrap(c.inputs[1], s.params));
  if (shift) args.emplace(DNNL_ARG_SHIFT, Wrap(c.inputs[2], s.params));
  Execute(*prim, args);
  return absl::OkStatus();
}

absl::Status LayerNormBackward(KernelCall& c) {
  int64_t rows, cols;
  LayerNormSetup s = SetupLayerNorm(c.inputs[1], c.attrs, &rows, &cols);
  if (rows == 0 || cols == 0) return LoopLayerNormBackward(c);
  // The statistics are recomputed (not saved by the forward), like the loop kernel does.
  std::vector<float> mean(rows), var(rows);
  const float* x = c.inputs[1].data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double m, v;
    RowMoments(x + r * cols, cols, &m, &v);
    mean[r] = static_cast<float>(m);
    var[r] = static_cast<float>(v);
  }
  std::vector<float> ones;
  const float* w = nullptr;
  if (c.inputs.size() > 2) {
    w = c.inputs[2].data<float>();
  } else {
    ones.assign(cols, 1.0f);
    w = ones.data();
  }
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  auto prim = GetPrimitive(
      "lnorm_bwd", [&] { return "lnorm_bwd|" + s.Key(); },
      [&] {
        using F = dnnl::layer_normalization_forward;
        using B = dnnl::layer_normalization_backward;
        F::primitive_desc fwd(F::desc(prop_kind::forward_training, s.data, s.eps, flags), Engine());
        B::primitive_desc pd(B::desc(prop_kind::backward, s.data, s.data, s.eps, flags), Attr(),
                             Engine(), fwd);
        return CachedPrimitive{B(pd), pd};
      });
  const memory::desc stat = PlainDesc({rows}, DType::kF32);
  // oneDNN 2.6 checks that a shift argument is bound whenever use_shift is set, even in the
  // backward pass, which does not read it.
  std::vector<float> shift(cols, 0.0f);
  Execute(*prim, {{DNNL_ARG_SRC, Wrap(c.inputs[1], s.data)},
                  {DNNL_ARG_DIFF_DST, Wrap(c.inputs[0], s.data)},
                  {DNNL_ARG_MEAN, WrapPtr(mean.data(), stat)},
                  {DNNL_ARG_VARIANCE, WrapPtr(var.data(), stat)},
                  {DNNL_ARG_SCALE, WrapPtr(w, s.params)},
                  {DNNL_ARG_SHIFT, WrapPtr(shift.data(), s.params)},
                  {DNNL_ARG_DIFF_SRC, Wrap(c.outputs[0], s.data)},
                  {DNNL_ARG_DIFF_SCALE, Wrap(c.outputs[1], s.params)},
                  {DNNL_ARG_DIFF_SHIFT, Wrap(c.outputs[2], s.params)}});
  return absl::OkStatus();
}

}  // namespace

void RegisterConvNdTransposeKernels(KernelTable& t);  // onednn_conv_nd_transpose.cc

void RegisterBatchNormResampleKernels(KernelTable& t);  // onednn_batch_norm_resample.cc

void RegisterNnKernels(KernelTable& t) {
  RegisterBatchNormResampleKernels(t);
  RegisterConvNdTransposeKernels(t);
  // An empty output or weight (forward) or gradient (backward) needs no convolution; the others
  // run where the shared set-up exists.
  AddF32Kernel(t, "conv2d", ConvForward, [](const KernelQuery& q) {
    return NumElements(q.outputs[0].shape) == 0 || NumElements(q.inputs[1].shape) == 0 ||
           ConvSetupExists(q, {0, 1, kOutput}, 2, false);
  });
  AddF32Kernel(t, "conv2d_backward_input", ConvBackwardInput, [](const KernelQuery& q) {
    return NumElements(q.inputs[0].shape) == 0 || NumElements(q.outputs[0].shape) == 0 ||
           ConvSetupExists(q, {kOutput, 1, 0}, 2, false);
  });
  AddF32Kernel(t, "conv2d_backward_weight", ConvBackwardWeight, [](const KernelQuery& q) {
    return NumElements(q.inputs[0].shape) == 0 || NumElements(q.outputs[0].shape) == 0 ||
           ConvSetupExists(q, {1, kOutput, 0}, 2, false);
  });
  AddF32Kernel(t, "max_pool2d", [](KernelCall& c) { return PoolForward(c, true); });
  AddF32Kernel(t, "max_pool2d_backward", [](KernelCall& c) { return PoolBackward(c, true); });
  AddF32Kernel(t, "avg_pool2d", [](KernelCall& c) { return PoolForward(c, false); });
  AddF32Kernel(t, "avg_pool2d_backward", [](KernelCall& c) { return PoolBackward(c, false); });
  AddF32Kernel(t, "layer_norm", LayerNormForward);
  AddF32Kernel(t, "layer_norm_backward", LayerNormBackward);
}

}  // namespace tensord::cpu::onednn
