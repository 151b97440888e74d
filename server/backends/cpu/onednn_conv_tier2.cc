// oneDNN kernels of the f32 tier-2 convolutions: conv3d and conv_transpose2d, each with its
// input and weight gradients. All six run oneDNN's convolution primitives (forward, backward
// data, backward weights) in the roles of a convolution from `x` to `y`: a transposed
// convolution is the adjoint of the convolution with the same attributes, and PyTorch's
// transposed weight [C_in, C_out/groups, *k] is that convolution's weight [O, C/groups, *k]
// as it is, so no weight reorder is needed (oneDNN's deconvolution runs the same kernels).
// Like conv2d's kernels, the primitives choose blocked layouts and operands are reordered
// around the call. Calls oneDNN cannot reproduce exactly (empty tensors, an output_padding of
// at least the stride) are handed on to the loop kernels.
#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_join.h"
#include "server/backends/cpu/onednn_common.h"
#include "server/backends/cpu/onednn_layout.h"
#include "server/ops/nn_geometry.h"

namespace tensord::cpu::onednn {
namespace {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;

// A convolution from x [N, C, *s] to y [N, O, *s'] with weight [O, C/g, *k] (batch 1 when
// unbatched).
struct Setup {
  memory::desc x, w, y, b;  // the tensors' plain layouts
  memory::desc xa, wa, ya;  // the same dims in any layout, for the primitive to choose
  memory::dims strides, dilates, pad_l, pad_r;
  std::string key;
};

memory::dims Batched(const Shape& s, int spatial) {
  memory::dims d(s.begin(), s.end());
  if (s.size() == static_cast<size_t>(spatial) + 1) d.insert(d.begin(), 1);
  return d;
}

std::string Ints(const memory::dims& v) { return absl::StrJoin(v, ","); }

// nullopt when oneDNN's size rule (y = (x + pad_l + pad_r - extent) / stride + 1) cannot give
// y with symmetric padding: a transposed convolution's output_padding of at least its stride.
std::optional<Setup> MakeSetup(const Shape& x, const Shape& w, const Shape& y,
                               const nn::ConvNdParams& p, bool bias) {
  if (NumElements(x) == 0 || NumElements(w) == 0 || NumElements(y) == 0) return std::nullopt;
  Setup s;
  const memory::dims xd = Batched(x, p.spatial), yd = Batched(y, p.spatial);
  for (int i = 0; i < p.spatial; ++i) {
    const int64_t extent = p.dilation[i] * (w[2 + i] - 1) + 1;
    const int64_t span = xd[2 + i] + 2 * p.padding[i] - extent;
    if (span < 0 || span / p.stride[i] + 1 != yd[2 + i]) return std::nullopt;
    s.strides.push_back(p.stride[i]);
    s.dilates.push_back(p.dilation[i] - 1);  // oneDNN counts the gaps
    s.pad_l.push_back(p.padding[i]);
  }
  s.pad_r = s.pad_l;
  const auto f32 = memory::data_type::f32;
  s.x = PlainDesc(Shape(xd.begin(), xd.end()), DType::kF32);
  s.y = PlainDesc(Shape(yd.begin(), yd.end()), DType::kF32);
  Shape wd = w;
  if (p.groups > 1) {
    // [O, C/g, *k] has the layout of oneDNN's grouped [g, O/g, C/g, *k].
    wd.insert(wd.begin(), p.groups);
    wd[1] /= p.groups;
  }
  s.w = PlainDesc(wd, DType::kF32);
  if (bias) s.b = PlainDesc({w[0]}, DType::kF32);
  const auto any = memory::format_tag::any;
  s.xa = memory::desc(s.x.dims(), f32, any);
  s.wa = memory::desc(s.w.dims(), f32, any);
  s.ya = memory::desc(s.y.dims(), f32, any);
  s.key = absl::StrCat(DescKey(s.x), DescKey(s.w), DescKey(s.y), bias ? "b" : "", "|",
                       Ints(s.strides), "|", Ints(s.dilates), "|", Ints(s.pad_l));
  return s;
}

dnnl::convolution_forward::primitive_desc ForwardPd(
    const Setup& s, bool bias, const dnnl::primitive_attr& attr = dnnl::primitive_attr()) {
  using F = dnnl::convolution_forward;
  F::desc d = bias ? F::desc(prop_kind::forward_training, algorithm::convolution_direct, s.xa, s.wa,
                             s.b, s.ya, s.strides, s.dilates, s.pad_l, s.pad_r)
                   : F::desc(prop_kind::forward_training, algorithm::convolution_direct, s.xa, s.wa,
                             s.ya, s.strides, s.dilates, s.pad_l, s.pad_r);
  return F::primitive_desc(d, attr, Engine());
}

// y = conv(x, w) (+ b).
void RunForward(const Setup& s, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
  auto prim = GetPrimitive("convnd_fwd|" + s.key, [&] {
    auto pd = ForwardPd(s, b != nullptr, Attr());
    return CachedPrimitive{dnnl::convolution_forward(pd), pd};
  });
  Binder bind(*prim);
  bind.In(DNNL_ARG_SRC, x, s.x);
  bind.In(DNNL_ARG_WEIGHTS, w, s.w);
  if (b) bind.In(DNNL_ARG_BIAS, *b, s.b);
  bind.Out(DNNL_ARG_DST, y, s.y);
  bind.Run();
}

// gx = the adjoint of conv(., w) applied to gy.
void RunBackwardData(const Setup& s, const Tensor& gy, const Tensor& w, Tensor& gx) {
  auto prim = GetPrimitive("convnd_bwd_data|" + s.key, [&] {
    using B = dnnl::convolution_backward_data;
    B::desc d(algorithm::convolution_direct, s.xa, s.wa, s.ya, s.strides, s.dilates, s.pad_l,
              s.pad_r);
    B::primitive_desc pd(d, Attr(), Engine(), ForwardPd(s, false));
    return CachedPrimitive{B(pd), pd};
  });
  Binder bind(*prim);
  bind.In(DNNL_ARG_DIFF_DST, gy, s.y);
  bind.In(DNNL_ARG_WEIGHTS, w, s.w);
  bind.Out(DNNL_ARG_DIFF_SRC, gx, s.x);
  bind.Run();
}

// gw = the gradient of <gy, conv(x, w)> with respect to w.
void RunBackwardWeights(const Setup& s, const Tensor& gy, const Tensor& x, Tensor& gw) {
  auto prim = GetPrimitive("convnd_bwd_weights|" + s.key, [&] {
    using B = dnnl::convolution_backward_weights;
    B::desc d(algorithm::convolution_direct, s.xa, s.wa, s.ya, s.strides, s.dilates, s.pad_l,
              s.pad_r);
    B::primitive_desc pd(d, Attr(), Engine(), ForwardPd(s, false));
    return CachedPrimitive{B(pd), pd};
  });
  Binder bind(*prim);
  bind.In(DNNL_ARG_DIFF_DST, gy, s.y);
  bind.In(DNNL_ARG_SRC, x, s.x);
  bind.Out(DNNL_ARG_DIFF_WEIGHTS, gw, s.w);
  bind.Run();
}

// out[n, c, ...] += b[c].
void AddBias(Tensor& out, const Tensor& b, int spatial) {
  const Shape& s = out.shape();
  const size_t c_dim = s.size() - static_cast<size_t>(spatial) - 1;
  int64_t plane = 1;
  for (size_t d = c_dim + 1; d < s.size(); ++d) plane *= s[d];
  float* o = out.data<float>();
  const float* bias = b.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] += bias[(i / plane) % s[c_dim]];
}

absl::Status Conv3d(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 3, false));
  const bool bias = c.inputs.size() == 3;
  auto s = MakeSetup(c.inputs[0].shape(), c.inputs[1].shape(), c.outputs[0].shape(), p, bias);
  if (!s) return HandOn(c, "onednn_" + c.op.name);
  RunForward(*s, c.inputs[0], c.inputs[1], bias ? &c.inputs[2] : nullptr, c.outputs[0]);
  return absl::OkStatus();
}

absl::Status Conv3dBackwardInput(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 3, false));
  auto s = MakeSetup(c.outputs[0].shape(), c.inputs[1].shape(), c.inputs[0].shape(), p, false);
  if (!s) return HandOn(c, "onednn_" + c.op.name);
  RunBackwardData(*s, c.inputs[0], c.inputs[1], c.outputs[0]);
  return absl::OkStatus();
}

absl::Status Conv3dBackwardWeight(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 3, false));
  auto s = MakeSetup(c.inputs[1].shape(), c.outputs[0].shape(), c.inputs[0].shape(), p, false);
  if (!s) return HandOn(c, "onednn_" + c.op.name);
  RunBackwardWeights(*s, c.inputs[0], c.inputs[1], c.outputs[0]);
  return absl::OkStatus();
}

// The transposed convolution's output is the convolution's x, its input the convolution's y.
absl::Status ConvTranspose2d(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 2, true));
  auto s = MakeSetup(c.outputs[0].shape(), c.inputs[1].shape(), c.inputs[0].shape(), p, false);
  if (!s) return HandOn(c, "onednn_" + c.op.name);
  RunBackwardData(*s, c.inputs[0], c.inputs[1], c.outputs[0]);
  if (c.inputs.size() == 3) AddBias(c.outputs[0], c.inputs[2], 2);
  return absl::OkStatus();
}

absl::Status ConvTranspose2dBackwardInput(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 2, true));
  auto s = MakeSetup(c.inputs[0].shape(), c.inputs[1].shape(), c.outputs[0].shape(), p, false);
  if (!s) return HandOn(c, "onednn_" + c.op.name);
  RunForward(*s, c.inputs[0], c.inputs[1], nullptr, c.outputs[0]);
  return absl::OkStatus();
}

absl::Status ConvTranspose2dBackwardWeight(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 2, true));
  auto s = MakeSetup(c.inputs[0].shape(), c.outputs[0].shape(), c.inputs[1].shape(), p, false);
  if (!s) return HandOn(c, "onednn_" + c.op.name);
  RunBackwardWeights(*s, c.inputs[1], c.inputs[0], c.outputs[0]);
  return absl::OkStatus();
}

void Add(KernelTable& t, const std::string& op, absl::Status (*fn)(KernelCall&)) {
  t.Add(op,
        Kernel{"onednn_" + op, [](absl::Span<const DType> d, const Attrs*) { return AllF32(d); },
               [fn](KernelCall& c) { return Guard(c.op.name, [&] { return fn(c); }); }});
}

}  // namespace

// Called from RegisterNnKernels (onednn_nn.cc).
void RegisterConvTier2Kernels(KernelTable& t) {
  Add(t, "conv3d", Conv3d);
  Add(t, "conv3d_backward_input", Conv3dBackwardInput);
  Add(t, "conv3d_backward_weight", Conv3dBackwardWeight);
  Add(t, "conv_transpose2d", ConvTranspose2d);
  Add(t, "conv_transpose2d_backward_input", ConvTranspose2dBackwardInput);
  Add(t, "conv_transpose2d_backward_weight", ConvTranspose2dBackwardWeight);
}

}  // namespace tensord::cpu::onednn
