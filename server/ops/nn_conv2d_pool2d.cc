// Convolution and pooling (torch.nn.functional.conv2d, max_pool2d, avg_pool2d). Their
// gradients are internal ops with kernels of their own (oneDNN's backward primitives for f32),
// given the forward's attributes plus the shape of the tensor they reconstruct.
#include "absl/strings/str_cat.h"
#include "server/ops/nn_geometry.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {
using namespace ops;

AttrSpec IntsDefault(std::string name, std::vector<int64_t> def) {
  return {std::move(name), AttrType::kInts, std::move(def)};
}

// conv2d's padding may also be 'valid' or 'same' (its composite form); the gradient ops see
// the ints that form resolves to.
std::vector<AttrSpec> ConvAttrs(bool client_facing = false) {
  AttrSpec padding = IntsDefault("padding", {0});
  if (client_facing) {
    padding.type = AttrType::kIntsOrString;
    padding.choices = {"valid", "same"};
  }
  return {IntsDefault("stride", {1}), std::move(padding), IntsDefault("dilation", {1}),
          IntAttr("groups", 1)};
}

std::vector<AttrSpec> PoolAttrs(bool max_pool) {
  std::vector<AttrSpec> a = {RequiredIntsAttr("kernel_size"), IntsAttr("stride"),
                             IntsDefault("padding", {0}), BoolAttr("ceil_mode", false)};
  if (max_pool) {
    a.push_back(IntsDefault("dilation", {1}));
    a.push_back(BoolAttr("return_indices", false));
  } else {
    a.push_back(BoolAttr("count_include_pad", true));
    a.push_back(OptionalIntAttr("divisor_override"));
  }
  return a;
}

std::vector<AttrSpec> With(std::vector<AttrSpec> a, AttrSpec extra) {
  a.push_back(std::move(extra));
  return a;
}

OpDef NnOp(const std::string& name, std::vector<std::string> inputs, int min_inputs) {
  OpDef d;
  d.name = name;
  d.category = "nn";
  d.input_names = std::move(inputs);
  d.min_inputs = min_inputs;
  d.max_inputs = static_cast<int>(d.input_names.size());
  d.dtypes = kFloat;
  d.marking = Marking::kDifferentiable;
  return d;
}

OpDef InternalOp(const std::string& name, std::vector<std::string> inputs) {
  OpDef d = NnOp(name, std::move(inputs), 0);
  d.min_inputs = d.max_inputs;
  d.internal = true;
  d.marking = Marking::kUnmarked;
  return d;
}

AttrMap Plus(const Attrs& attrs, const std::string& name, AttrValue v) {
  AttrMap m = attrs.map();
  m[name] = std::move(v);
  return m;
}

// ---- conv2d -----------------------------------------------------------------------------------

absl::StatusOr<std::vector<TensorMeta>> Conv2dInfer(absl::Span<const TensorMeta> in,
                                                    const Attrs& a) {
  RETURN_IF_ERROR(SameDtype("conv2d", in));
  ASSIGN_OR_RETURN(nn::Conv2dParams p, nn::ReadConv2dParams("conv2d", a));
  ASSIGN_OR_RETURN(Shape out, nn::Conv2dOutputShape("conv2d", in[0].shape, in[1].shape, p));
  if (in.size() == 3 && in[2].shape != Shape{in[1].shape[0]}) {
    return ShapeError("conv2d", absl::StrCat("weight of shape ", ShapeToString(in[1].shape),
                                             " expects a bias of shape [", in[1].shape[0],
                                             "], got ", ShapeToString(in[2].shape)));
  }
  return std::vector<TensorMeta>{{in[0].dtype, out}};
}

absl::StatusOr<std::vector<Tensor>> Conv2dBackward(const GradContext& g) {
  GradOps o(g.run);
  const Tensor& x = g.inputs[0];
  const Tensor& w = g.inputs[1];
  const Tensor& gy = g.grad_outputs[0];
  std::vector<Tensor> grads(g.inputs.size());
  if (g.needs_input_grad[0]) {
    ASSIGN_OR_RETURN(grads[0], o.Op(opname::conv2d_backward_input, {gy, w},
                                    Plus(g.attrs, "input_size", x.shape())));
  }
  if (g.needs_input_grad[1]) {
    ASSIGN_OR_RETURN(grads[1], o.Op(opname::conv2d_backward_weight, {gy, x},
                                    Plus(g.attrs, "weight_size", w.shape())));
  }
  if (g.inputs.size() == 3 && g.needs_input_grad[2]) {
    std::vector<int64_t> dims =
        x.rank() == 4 ? std::vector<int64_t>{0, 2, 3} : std::vector<int64_t>{1, 2};
    ASSIGN_OR_RETURN(grads[2], o.Sum(gy, dims, false));
  }
  return grads;
}

// Checks that `grad` is the output gradient of a conv2d of `input_shape` with `weight_shape`.
absl::Status CheckConvGrad(const std::string& op, const Shape& grad, const Shape& input_shape,
                           const Shape& weight_shape, const Attrs& a) {
  ASSIGN_OR_RETURN(nn::Conv2dParams p, nn::ReadConv2dParams(op, a));
  ASSIGN_OR_RETURN(Shape out, nn::Conv2dOutputShape(op, input_shape, weight_shape, p));
  if (out != grad) {
    return ShapeError(op, absl::StrCat("output gradient ", ShapeToString(grad), " does not match ",
                                       "the forward output ", ShapeToString(out)));
  }
  return absl::OkStatus();
}

// ---- pooling ----------------------------------------------------------------------------------

InferFn PoolInfer(const std::string& op, bool max_pool) {
  return [op, max_pool](absl::Span<const TensorMeta> in,
                        const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(nn::Pool2dParams p, nn::ReadPool2dParams(op, a, max_pool));
    if (a.Has("divisor_override") && a.GetInt("divisor_override") == 0) {
      return AttrError(op, "divisor_override", "must not be zero");
    }
    ASSIGN_OR_RETURN(Shape out, nn::Pool2dOutputShape(op, in[0].shape, p));
    std::vector<TensorMeta> outs = {{in[0].dtype, out}};
    // return_indices: PyTorch's second output, each maximum's offset in its input plane.
    if (max_pool && a.GetBool("return_indices")) outs.push_back({DType::kI64, out});
    return outs;
  };
}

// The values' gradient; the indices output (return_indices) is not differentiable, and the
// gradient op, which recomputes the maxima, has no such attribute.
BackwardFn PoolBackward(const std::string& backward_op) {
  return [backward_op](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    AttrMap attrs = g.attrs.map();
    attrs.erase("return_indices");
    ASSIGN_OR_RETURN(Tensor gx, o.Op(backward_op, {g.grad_outputs[0], g.inputs[0]}, attrs));
    return std::vector<Tensor>{gx};
  };
}

InferFn PoolBackwardInfer(const std::string& op, bool max_pool) {
  InferFn forward = PoolInfer(op, max_pool);
  return [op, forward](absl::Span<const TensorMeta> in,
                       const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(SameDtype(op, in));
    ASSIGN_OR_RETURN(std::vector<TensorMeta> out, forward(in.subspan(1), a));
    if (out[0].shape != in[0].shape) {
      return ShapeError(
          op, absl::StrCat("output gradient ", ShapeToString(in[0].shape),
                           " does not match the forward output ", ShapeToString(out[0].shape)));
    }
    return std::vector<TensorMeta>{in[1]};
  };
}

}  // namespace

void RegisterNnNormOps(OpRegistry& r);           // nn_layer_norm_dropout.cc
void RegisterBatchGroupNormOps(OpRegistry& r);   // nn_batch_group_norm.cc
void RegisterConvNdTransposeOps(OpRegistry& r);  // nn_conv_nd_transpose.cc
// conv2d's padding='valid' / 'same' (nn_conv_nd_transpose.cc, shared with conv1d and conv3d).
CompositeFn ConvPaddingStringForm(const std::string& op, int spatial);

void RegisterNnOps(OpRegistry& r) {
  RegisterNnNormOps(r);
  RegisterConvNdTransposeOps(r);
  RegisterBatchGroupNormOps(r);
  OpDef conv = NnOp("conv2d", {"input", "weight", "bias"}, 2);
  conv.attrs = ConvAttrs(true);
  conv.infer = Conv2dInfer;
  conv.backward = Conv2dBackward;
  conv.composite_form_when = nn::HasPaddingString;
  conv.composite_form = ConvPaddingStringForm("conv2d", 2);
  conv.compute_bound = true;
  conv.doc =
      "torch.nn.functional.conv2d over [N, C, H, W] or [C, H, W] input; padding may be 'valid' "
      "(none) or 'same' (stride 1; dilation * (kernel - 1) per dim, the larger half after, as "
      "PyTorch)";
  MustAdd(r, std::move(conv));

  OpDef conv_bi = InternalOp("conv2d_backward_input", {"grad_output", "weight"});
  conv_bi.attrs = With(ConvAttrs(), RequiredIntsAttr("input_size"));
  conv_bi.compute_bound = true;
  conv_bi.infer = [](absl::Span<const TensorMeta> in,
                     const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    const std::string op = "conv2d_backward_input";
    RETURN_IF_ERROR(SameDtype(op, in));
    const Shape input_size = a.GetInts("input_size");
    RETURN_IF_ERROR(CheckConvGrad(op, in[0].shape, input_size, in[1].shape, a));
    return std::vector<TensorMeta>{{in[0].dtype, input_size}};
  };
  MustAdd(r, std::move(conv_bi));

  OpDef conv_bw = InternalOp("conv2d_backward_weight", {"grad_output", "input"});
  conv_bw.attrs = With(ConvAttrs(), RequiredIntsAttr("weight_size"));
  conv_bw.compute_bound = true;
  conv_bw.infer = [](absl::Span<const TensorMeta> in,
                     const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    const std::string op = "conv2d_backward_weight";
    RETURN_IF_ERROR(SameDtype(op, in));
    const Shape weight_size = a.GetInts("weight_size");
    RETURN_IF_ERROR(CheckConvGrad(op, in[0].shape, in[1].shape, weight_size, a));
    return std::vector<TensorMeta>{{in[0].dtype, weight_size}};
  };
  MustAdd(r, std::move(conv_bw));

  for (bool max_pool : {true, false}) {
    const std::string name = max_pool ? "max_pool2d" : "avg_pool2d";
    OpDef pool = NnOp(name, {"input"}, 1);
    pool.attrs = PoolAttrs(max_pool);
    pool.infer = PoolInfer(name, max_pool);
    pool.backward = PoolBackward(name + "_backward");
    pool.doc = absl::StrCat("torch.nn.functional.", name, " over [N, C, H, W] or [C, H, W] input",
                            max_pool ? "; return_indices adds the i64 offset of each maximum in "
                                       "its input plane (h * W + w), PyTorch's indices"
                                     : "");
    MustAdd(r, std::move(pool));

    OpDef back = InternalOp(name + "_backward", {"grad_output", "input"});
    back.attrs = PoolAttrs(max_pool);
    if (max_pool) back.attrs.pop_back();  // return_indices: the gradient has one output
    back.infer = PoolBackwardInfer(name + "_backward", max_pool);
    MustAdd(r, std::move(back));
  }
}

}  // namespace tensord
