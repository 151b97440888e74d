// oneDNN's convolution primitives (forward, backward data, backward weights) for a convolution
// of any spatial rank, shared by conv2d and the 1-d/3-d and transposed convolutions: one set-up of
// descriptors and padding, primitives cached by that set-up's key. The primitives choose blocked
// layouts and operands are reordered around the call (Binder).
#include "server/backends/cpu/onednn_conv.h"

#include <unordered_map>

#include "absl/strings/str_join.h"
#include "server/backends/cpu/onednn_layout.h"

namespace tensord::cpu::onednn {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;

namespace {

memory::dims Batched(const Shape& s, int spatial) {
  memory::dims d(s.begin(), s.end());
  if (s.size() == static_cast<size_t>(spatial) + 1) d.insert(d.begin(), 1);
  return d;
}

std::string Ints(const memory::dims& v) { return absl::StrJoin(v, ","); }

dnnl::convolution_forward::primitive_desc ConvForwardPd(
    const ConvSetup& s, bool bias, const dnnl::primitive_attr& attr = dnnl::primitive_attr()) {
  using F = dnnl::convolution_forward;
  F::desc d = bias ? F::desc(prop_kind::forward_training, algorithm::convolution_direct, s.xa, s.wa,
                             s.b, s.ya, s.strides, s.dilates, s.pad_l, s.pad_r)
                   : F::desc(prop_kind::forward_training, algorithm::convolution_direct, s.xa, s.wa,
                             s.ya, s.strides, s.dilates, s.pad_l, s.pad_r);
  return F::primitive_desc(d, attr, Engine());
}

// The cached backward primitive B (backward data or backward weights) of convolution s, with
// the forward primitive as its hint.
template <typename B>
auto BackwardPrimitive(const char* kind, const ConvSetup& s) {
  return GetPrimitive(
      kind, [&] { return absl::StrCat(kind, "|", s.Key()); },
      [&] {
        typename B::desc d(algorithm::convolution_direct, s.xa, s.wa, s.ya, s.strides, s.dilates,
                           s.pad_l, s.pad_r);
        typename B::primitive_desc pd(d, Attr(), Engine(), ConvForwardPd(s, false));
        return CachedPrimitive{B(pd), pd};
      });
}

}  // namespace

// nullopt when oneDNN's size rule (y = (x + pad_l + pad_r - extent) / stride + 1) cannot give
// y with symmetric padding: a transposed convolution's output_padding of at least its stride.
std::optional<ConvSetup> MakeConvSetup(const Shape& x, const Shape& w, const Shape& y,
                                       const nn::ConvNdParams& p, bool bias) {
  if (NumElements(x) == 0 || NumElements(w) == 0 || NumElements(y) == 0) return std::nullopt;
  ConvSetup s;
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
  s.bias = bias;
  return s;
}

std::string ConvSetup::Key() const {
  return absl::StrCat(DescKey(x), DescKey(w), DescKey(y), bias ? "b" : "", "|", Ints(strides), "|",
                      Ints(dilates), "|", Ints(pad_l));
}

bool ConvSetupExists(const KernelQuery& q, ConvRoles roles, int spatial, bool transposed) {
  const auto shape = [&q](int role) -> const Shape& {
    return role == kOutput ? q.outputs[0].shape : q.inputs[role].shape;
  };
  absl::StatusOr<nn::ConvNdParams> p =
      nn::ReadConvNdParams(q.op.name, *q.attrs, spatial, transposed);
  if (!p.ok()) return true;
  // The bias changes no size rule.
  return MakeConvSetup(shape(roles.x), shape(roles.w), shape(roles.y), *p, false).has_value();
}

// y = conv(x, w) (+ b), then the chain's post-ops.
bool RunConvForward(const ConvSetup& s, const Tensor& x, const Tensor& w, const Tensor* b,
                    Tensor& y, const PostOpChain* chain) {
  std::shared_ptr<const CachedPrimitive> prim;
  try {
    prim = GetPrimitive(
        "conv_fwd",
        [&] {
          return chain ? absl::StrCat("conv_fwd|", s.Key(), "|post", chain->Key())
                       : absl::StrCat("conv_fwd|", s.Key());
        },
        [&] {
          auto pd = ConvForwardPd(s, b != nullptr, AttrWith(chain));
          return CachedPrimitive{dnnl::convolution_forward(pd), pd, IsReference(pd)};
        });
  } catch (const dnnl::error&) {
    if (chain == nullptr) throw;
    return false;  // a chain no implementation takes
  }
  if (chain != nullptr && prim->reference) return false;
  Binder bind(*prim);
  bind.In(DNNL_ARG_SRC, x, s.x);
  bind.In(DNNL_ARG_WEIGHTS, w, s.w);
  if (b) bind.In(DNNL_ARG_BIAS, *b, s.b);
  if (chain != nullptr) {
    for (const PostOpChain::Operand& o : chain->operands) {
      bind.In(PostOperandArg(o), *o.tensor, o.plain);
    }
  }
  bind.Out(DNNL_ARG_DST, y, s.y);
  bind.Run();
  return true;
}

dnnl::memory::desc ConvDstLayout(const ConvSetup& s, bool bias) {
  auto prim = GetPrimitive(
      "conv_dst_layout", [&] { return absl::StrCat("conv_fwd|", s.Key()); },
      [&] {
        auto pd = ConvForwardPd(s, bias, Attr());
        return CachedPrimitive{dnnl::convolution_forward(pd), pd, IsReference(pd)};
      });
  return prim->pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_DST);
}

// gx = the adjoint of conv(., w) applied to gy.
void RunConvBackwardData(const ConvSetup& s, const Tensor& gy, const Tensor& w, Tensor& gx) {
  auto prim = BackwardPrimitive<dnnl::convolution_backward_data>("conv_bwd_data", s);
  Binder bind(*prim);
  bind.In(DNNL_ARG_DIFF_DST, gy, s.y);
  bind.In(DNNL_ARG_WEIGHTS, w, s.w);
  bind.Out(DNNL_ARG_DIFF_SRC, gx, s.x);
  bind.Run();
}

// gw = the gradient of <gy, conv(x, w)> with respect to w.
void RunConvBackwardWeights(const ConvSetup& s, const Tensor& gy, const Tensor& x, Tensor& gw) {
  auto prim = BackwardPrimitive<dnnl::convolution_backward_weights>("conv_bwd_weights", s);
  Binder bind(*prim);
  bind.In(DNNL_ARG_DIFF_DST, gy, s.y);
  bind.In(DNNL_ARG_SRC, x, s.x);
  bind.Out(DNNL_ARG_DIFF_WEIGHTS, gw, s.w);
  bind.Run();
}

}  // namespace tensord::cpu::onednn
