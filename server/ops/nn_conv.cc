// Convolutions and transposed convolutions (torch.nn.functional.conv1d, conv2d, conv3d,
// conv_transpose1d, conv_transpose2d). conv2d, conv3d and conv_transpose2d are primitives whose
// gradients are internal ops with kernels of their own (oneDNN's backward primitives for f32),
// given the forward's attributes plus the shape of the tensor they reconstruct; the 1-d ops insert
// a unit height, run the 2-d op and drop it again, as PyTorch does, so their gradients are the 2-d
// ops'. A transposed convolution is the adjoint of a convolution with the same attributes: its
// forward is a convolution's input gradient, its input gradient a convolution, its weight gradient
// a convolution's weight gradient with the roles swapped. Those have internal ops of their own (not
// conv2d's) because output_padding can make the output larger than any convolution of it would
// reconstruct.
#include "absl/strings/str_cat.h"
#include "server/ops/nn_geometry.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {
using namespace ops;
using Ints = std::vector<int64_t>;

AttrSpec IntsDefault(std::string name, Ints def) {
  return {std::move(name), AttrType::kInts, std::move(def)};
}

// PyTorch's argument order: conv(stride, padding, dilation, groups),
// conv_transpose(stride, padding, output_padding, groups, dilation). A client-facing
// convolution's padding may also be 'valid' or 'same' (ConvPaddingStringForm); the gradient
// ops see the ints that form resolves to.
std::vector<AttrSpec> ConvAttrs(bool transposed, bool client_facing = false) {
  if (transposed) {
    return {IntsDefault("stride", {1}), IntsDefault("padding", {0}),
            IntsDefault("output_padding", {0}), IntAttr("groups", 1), IntsDefault("dilation", {1})};
  }
  AttrSpec padding = IntsDefault("padding", {0});
  if (client_facing) {
    padding.type = AttrType::kIntsOrString;
    padding.choices = {"valid", "same"};
  }
  return {IntsDefault("stride", {1}), std::move(padding), IntsDefault("dilation", {1}),
          IntAttr("groups", 1)};
}

std::vector<AttrSpec> With(std::vector<AttrSpec> a, AttrSpec extra) {
  a.push_back(std::move(extra));
  return a;
}

constexpr char kPaddingStringDoc[] =
    "; padding may be 'valid' (none) or 'same' (stride 1; dilation * (kernel - 1) per dim, the "
    "larger half after, as PyTorch)";

AttrMap Plus(const Attrs& attrs, const std::string& name, AttrValue v) {
  AttrMap m = attrs.map();
  m[name] = std::move(v);
  return m;
}

OpDef ConvOp(const std::string& name, bool transposed) {
  OpDef d;
  d.name = name;
  d.category = "nn";
  d.input_names = {"input", "weight", "bias"};
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.attrs = ConvAttrs(transposed, true);
  d.dtypes = kFloat;
  d.marking = Marking::kDifferentiable;
  d.compute_bound = true;
  return d;
}

OpDef InternalOp(const std::string& name, std::vector<std::string> inputs,
                 std::vector<AttrSpec> attrs) {
  OpDef d;
  d.name = name;
  d.category = "nn";
  d.input_names = std::move(inputs);
  d.min_inputs = d.max_inputs = static_cast<int>(d.input_names.size());
  d.attrs = std::move(attrs);
  d.dtypes = kFloat;
  d.internal = true;
  d.compute_bound = true;
  return d;
}

InferFn ConvInfer(const std::string& op, int spatial, bool transposed) {
  return [op, spatial, transposed](absl::Span<const TensorMeta> in,
                                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(SameDtype(op, in));
    ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(op, a, spatial, transposed));
    ASSIGN_OR_RETURN(Shape out, nn::ConvNdOutputShape(op, in[0].shape, in[1].shape, p));
    const int64_t channels = nn::ConvNdOutChannels(in[1].shape, p);
    if (in.size() == 3 && in[2].shape != Shape{channels}) {
      return ShapeError(op, absl::StrCat("weight of shape ", ShapeToString(in[1].shape),
                                         " expects a bias of shape [", channels, "], got ",
                                         ShapeToString(in[2].shape)));
    }
    return std::vector<TensorMeta>{{in[0].dtype, out}};
  };
}

// Checks that `grad` is the output gradient of `forward` over `input_shape` and `weight_shape`.
absl::Status CheckGrad(const std::string& op, int spatial, bool transposed, const Shape& grad,
                       const Shape& input_shape, const Shape& weight_shape, const Attrs& a) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(op, a, spatial, transposed));
  ASSIGN_OR_RETURN(Shape out, nn::ConvNdOutputShape(op, input_shape, weight_shape, p));
  if (out != grad) {
    return ShapeError(op, absl::StrCat("output gradient ", ShapeToString(grad), " does not match ",
                                       "the forward output ", ShapeToString(out)));
  }
  return absl::OkStatus();
}

BackwardFn ConvBackward(const std::string& op) {
  return [op](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    const Tensor& x = g.inputs[0];
    const Tensor& w = g.inputs[1];
    const Tensor& gy = g.grad_outputs[0];
    std::vector<Tensor> grads(g.inputs.size());
    if (g.needs_input_grad[0]) {
      ASSIGN_OR_RETURN(
          grads[0], o.Op(op + "_backward_input", {gy, w}, Plus(g.attrs, "input_size", x.shape())));
    }
    if (g.needs_input_grad[1]) {
      ASSIGN_OR_RETURN(grads[1], o.Op(op + "_backward_weight", {gy, x},
                                      Plus(g.attrs, "weight_size", w.shape())));
    }
    if (g.inputs.size() == 3 && g.needs_input_grad[2]) {
      // Every dim but the channel one (1 when batched, 0 when not).
      const int64_t c_dim = x.rank() - static_cast<int64_t>(w.rank()) + 1;
      std::vector<int64_t> dims;
      for (int64_t d = 0; d < x.rank(); ++d) {
        if (d != c_dim) dims.push_back(d);
      }
      ASSIGN_OR_RETURN(grads[2], o.Sum(gy, dims, false));
    }
    return grads;
  };
}

// padding='valid' / 'same' of conv1d/2d/3d, as PyTorch computes them: the convolution with the
// ints of ResolvePaddingString, the input first padded by the difference on its far side where
// 'same' pads asymmetrically (an odd dilation * (kernel - 1)).
CompositeFn ConvPaddingStringForm(const std::string& op, int spatial) {
  return [op, spatial](OpRunner& run, absl::Span<const Tensor> in,
                       const Attrs& a) -> absl::StatusOr<std::vector<Tensor>> {
    ASSIGN_OR_RETURN(nn::PaddingFromString p,
                     nn::ResolvePaddingString(op, a, in[1].shape(), spatial));
    std::vector<Tensor> args(in.begin(), in.end());
    // An input of the wrong rank is left for the convolution's own shape error.
    const int64_t rank = in[0].rank();
    if (p.before != p.after && (rank == spatial + 1 || rank == spatial + 2)) {
      Ints pad;  // torch.nn.functional.pad's order: the last dim first, (before, after) each
      for (int i = spatial - 1; i >= 0; --i) {
        pad.push_back(0);
        pad.push_back(p.after[i] - p.before[i]);
      }
      ASSIGN_OR_RETURN(args[0], run.Run1(opname::pad, {in[0]}, {{"pad", pad}}));
    }
    AttrMap attrs = a.map();
    attrs["padding"] = p.before;
    return run.Run(op, std::move(args), std::move(attrs));
  };
}

// `dims`: the spatial dims' names for the doc ("H, W").
void AddConv(OpRegistry& r, const std::string& name, int spatial, bool transposed,
             const std::string& dims) {
  OpDef d = ConvOp(name, transposed);
  d.infer = ConvInfer(name, spatial, transposed);
  d.backward = ConvBackward(name);
  if (!transposed) {
    d.composite_form_when = nn::HasPaddingString;
    d.composite_form = ConvPaddingStringForm(name, spatial);
  }
  d.doc = absl::StrCat("torch.nn.functional.", name, " over [N, C, ", dims, "] or [C, ", dims,
                       "] input", transposed ? "" : kPaddingStringDoc);
  MustAdd(r, std::move(d));

  const std::string bi_name = name + "_backward_input";
  OpDef bi = InternalOp(bi_name, {"grad_output", "weight"},
                        With(ConvAttrs(transposed), RequiredIntsAttr("input_size")));
  bi.infer = [bi_name, spatial, transposed](
                 absl::Span<const TensorMeta> in,
                 const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(SameDtype(bi_name, in));
    const Shape input_size = a.GetInts("input_size");
    RETURN_IF_ERROR(
        CheckGrad(bi_name, spatial, transposed, in[0].shape, input_size, in[1].shape, a));
    return std::vector<TensorMeta>{{in[0].dtype, input_size}};
  };
  bi.doc = absl::StrCat("input gradient of ", name, " (used by its backward rule)");
  MustAdd(r, std::move(bi));

  const std::string bw_name = name + "_backward_weight";
  OpDef bw = InternalOp(bw_name, {"grad_output", "input"},
                        With(ConvAttrs(transposed), RequiredIntsAttr("weight_size")));
  bw.infer = [bw_name, spatial, transposed](
                 absl::Span<const TensorMeta> in,
                 const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(SameDtype(bw_name, in));
    const Shape weight_size = a.GetInts("weight_size");
    RETURN_IF_ERROR(
        CheckGrad(bw_name, spatial, transposed, in[0].shape, in[1].shape, weight_size, a));
    return std::vector<TensorMeta>{{in[0].dtype, weight_size}};
  };
  bw.doc = absl::StrCat("weight gradient of ", name, " (used by its backward rule)");
  MustAdd(r, std::move(bw));
}

// conv1d / conv_transpose1d through the 2-d op: [N, C, L] -> [N, C, 1, L] and the weight
// [A, B, k] -> [A, B, 1, k], with unit stride, no padding and unit dilation along the height.
void AddConv1d(OpRegistry& r, const std::string& name, const std::string& op2d, bool transposed) {
  OpDef d = ConvOp(name, transposed);
  d.doc =
      absl::StrCat("torch.nn.functional.", name, " over [N, C, L] or [C, L] input (computed by ",
                   op2d, ")", transposed ? "" : kPaddingStringDoc);
  const InferFn check = ConvInfer(name, 1, transposed);
  const CompositeFn padding_string = ConvPaddingStringForm(name, 1);
  d.composite = [name, op2d, transposed, check, padding_string](
                    OpRunner& run, absl::Span<const Tensor> in,
                    const Attrs& a) -> absl::StatusOr<std::vector<Tensor>> {
    // 'valid' / 'same' come back here as ints.
    if (nn::HasPaddingString(a)) return padding_string(run, in, a);
    std::vector<TensorMeta> metas;
    for (const Tensor& t : in) metas.push_back(t.meta());
    // Checked here so that errors name this op and its 1-d shapes.
    RETURN_IF_ERROR(check(metas, a).status());
    ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(name, a, 1, transposed));
    AttrMap attrs2d = {{"stride", Ints{1, p.stride[0]}},
                       {"padding", Ints{0, p.padding[0]}},
                       {"dilation", Ints{1, p.dilation[0]}},
                       {"groups", p.groups}};
    if (transposed) attrs2d["output_padding"] = Ints{0, p.output_padding[0]};
    std::vector<Tensor> args;
    for (int i = 0; i < 2; ++i) {
      ASSIGN_OR_RETURN(Tensor t, run.Run1(opname::unsqueeze, {in[i]}, {{"dim", int64_t{-2}}}));
      args.push_back(std::move(t));
    }
    if (in.size() == 3) args.push_back(in[2]);
    ASSIGN_OR_RETURN(Tensor y, run.Run1(op2d, std::move(args), std::move(attrs2d)));
    return run.Run(opname::squeeze, {y}, {{"dim", Ints{-2}}});
  };
  MustAdd(r, std::move(d));
}

}  // namespace

// The rest of the nn family, one file each.
void RegisterPoolOps(OpRegistry& r);                       // nn_pool.cc
void RegisterLayerNormEmbeddingDropoutOps(OpRegistry& r);  // nn_layer_norm_embedding_dropout.cc
void RegisterBatchGroupNormOps(OpRegistry& r);             // nn_batch_group_norm.cc
void RegisterResampleOps(OpRegistry& r);                   // nn_resample.cc
void RegisterAttentionOps(OpRegistry& r);                  // nn_attention.cc

// The nn family (from OpRegistry::Builtin): convolutions here, then the other files'.
void RegisterNnOps(OpRegistry& r) {
  AddConv(r, "conv2d", 2, false, "H, W");
  AddConv(r, "conv3d", 3, false, "D, H, W");
  AddConv(r, "conv_transpose2d", 2, true, "H, W");
  AddConv1d(r, "conv1d", "conv2d", false);
  AddConv1d(r, "conv_transpose1d", "conv_transpose2d", true);
  RegisterPoolOps(r);
  RegisterLayerNormEmbeddingDropoutOps(r);
  RegisterBatchGroupNormOps(r);
  RegisterResampleOps(r);
  RegisterAttentionOps(r);
}

}  // namespace tensord
