// Activations (torch.nn.functional names, attributes and defaults). Pointwise activations
// differentiate through a fused internal `<name>_backward(grad, saved)` op, one pass like
// PyTorch's threshold_backward/sigmoid_backward; softmax and log_softmax compose their
// gradient from other ops, so every backend with those ops can run it.
#include <cmath>

#include "server/ops/elementwise.h"
#include "server/ops/op_helpers.h"

namespace tensord {
namespace ops {

void AddPointwise(OpRegistry& r, const std::string& name, DTypeSet dtypes, InferFn infer,
                  Saved saved, std::vector<AttrSpec> attrs, int tier) {
  const std::string backward_name = name + "_backward";
  OpDef d;
  d.name = name;
  d.category = "activation";
  d.tier = tier;
  d.input_names = {"input"};
  d.attrs = attrs;
  d.dtypes = dtypes;
  d.marking = Marking::kDifferentiable;
  d.infer = std::move(infer);
  d.backward = [backward_name, saved](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    const Tensor& v = saved == Saved::kOutput ? g.outputs[0] : g.inputs[0];
    ASSIGN_OR_RETURN(Tensor gx, g.run.Run1(backward_name, {g.grad_outputs[0], v}, g.attrs.map()));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(d));

  OpDef b;
  b.name = backward_name;
  b.category = "activation";
  b.tier = tier;
  b.min_inputs = b.max_inputs = 2;
  b.input_names = {"grad_output", saved == Saved::kOutput ? "output" : "input"};
  b.attrs = std::move(attrs);
  b.dtypes = kFloat;
  b.promote_from = 0;
  b.infer = BroadcastInfer(backward_name);
  b.internal = true;
  b.doc = "gradient of " + name + " (used by its backward rule)";
  MustAdd(r, std::move(b));
}

InferFn SoftmaxInfer(const std::string& name) {
  return [name](absl::Span<const TensorMeta> in,
                const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    const int64_t rank = static_cast<int64_t>(in[0].shape.size());
    const int64_t dim = a.GetInt("dim");
    if (!NormalizeDim(dim, rank).ok()) {
      return WithMetadata(
          AttrError(name, "dim",
                    absl::StrCat("is ", dim, ", out of range for a tensor of rank ", rank)),
          {{"value", absl::StrCat(dim)}, {"rank", absl::StrCat(rank)}});
    }
    const DType out = a.GetDType("dtype").value_or(in[0].dtype);
    if (!IsFloat(out)) {
      return WithMetadata(
          AttrError(name, "dtype", absl::StrCat("must be a float dtype, got ", DTypeName(out))),
          {{"value", std::string(DTypeName(out))}});
    }
    return std::vector<TensorMeta>{{out, in[0].shape}};
  };
}

}  // namespace ops

namespace {
using namespace ops;
using Grads = absl::StatusOr<std::vector<Tensor>>;

// softmax / log_softmax over `dim`, optionally computed in `dtype` (torch's dtype argument).
OpDef Softmax(const std::string& name, BackwardFn backward) {
  OpDef d;
  d.name = name;
  d.category = "activation";
  d.input_names = {"input"};
  d.attrs = {RequiredIntAttr("dim"), DTypeAttr("dtype")};
  d.dtypes = kFloat;
  d.marking = Marking::kDifferentiable;
  d.infer = SoftmaxInfer(name);
  d.backward = std::move(backward);
  return d;
}

absl::StatusOr<int64_t> SoftmaxDim(const GradContext& g) {
  return NormalizeDim(g.attrs.GetInt("dim"), g.inputs[0].rank());
}

// dx = y * (g - sum(g * y, dim)).
Grads SoftmaxBackward(const GradContext& g) {
  GradOps o(g.run);
  const Tensor& y = g.outputs[0];
  const Tensor& go = g.grad_outputs[0];
  ASSIGN_OR_RETURN(int64_t dim, SoftmaxDim(g));
  ASSIGN_OR_RETURN(Tensor gy, o.Mul(go, y));
  ASSIGN_OR_RETURN(Tensor s, o.Sum(gy, {dim}, true));
  ASSIGN_OR_RETURN(Tensor centered, o.Sub(go, s));
  ASSIGN_OR_RETURN(Tensor gx, o.Mul(y, centered));
  return std::vector<Tensor>{gx};
}

// dx = g - exp(y) * sum(g, dim).
Grads LogSoftmaxBackward(const GradContext& g) {
  GradOps o(g.run);
  const Tensor& y = g.outputs[0];
  const Tensor& go = g.grad_outputs[0];
  ASSIGN_OR_RETURN(int64_t dim, SoftmaxDim(g));
  ASSIGN_OR_RETURN(Tensor s, o.Sum(go, {dim}, true));
  ASSIGN_OR_RETURN(Tensor p, o.Op("exp", {y}));
  ASSIGN_OR_RETURN(Tensor ps, o.Mul(p, s));
  ASSIGN_OR_RETURN(Tensor gx, o.Sub(go, ps));
  return std::vector<Tensor>{gx};
}

}  // namespace

void RegisterActivationOps(OpRegistry& r) {
  const InferFn same = SameAs(0);
  // relu on integers is max(x, 0) like torch.relu; sigmoid and tanh are floating-point
  // functions (integer inputs give f32); the others take float inputs only.
  AddPointwise(r, "relu", kFloatInt, same, Saved::kOutput);
  AddPointwise(r, "sigmoid", kAll, FloatFunctionInfer(), Saved::kOutput);
  AddPointwise(r, "tanh", kAll, FloatFunctionInfer(), Saved::kOutput);
  AddPointwise(r, "gelu", kFloat, same, Saved::kInput,
               {StringAttr("approximate", "none", {"none", "tanh"})});
  AddPointwise(r, "silu", kFloat, same, Saved::kInput);
  AddPointwise(r, "softplus", kFloat, same, Saved::kInput,
               {FloatAttr("beta", 1.0), FloatAttr("threshold", 20.0)});
  AddPointwise(r, "leaky_relu", kFloat, same, Saved::kInput, {FloatAttr("negative_slope", 0.01)});
  AddPointwise(r, "elu", kFloat, same, Saved::kInput, {FloatAttr("alpha", 1.0)});
  MustAdd(r, Softmax("softmax", SoftmaxBackward));
  MustAdd(r, Softmax("log_softmax", LogSoftmaxBackward));
  RegisterActivationTier2Ops(r);
}

}  // namespace tensord
