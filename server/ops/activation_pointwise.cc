// Pointwise activations (torch.nn.functional names, attributes and defaults): relu, sigmoid,
// tanh, gelu, silu, softplus, leaky_relu, elu, relu6, selu, celu, mish, softsign, hardsigmoid,
// hardswish, hardtanh, logsigmoid, tanhshrink, softshrink, hardshrink, threshold. Each
// differentiates through a fused internal `<name>_backward(grad, saved)` op, one pass like
// PyTorch's threshold_backward/sigmoid_backward. The activations along a dim (softmax and its
// kin, prelu, glu) are in activation_dim.cc.
#include <cmath>

#include "server/ops/elementwise.h"
#include "server/ops/op_helpers.h"

namespace tensord {
namespace ops {

void AddPointwise(OpRegistry& r, const std::string& name, DTypeSet dtypes, InferFn infer,
                  Saved saved, std::vector<AttrSpec> attrs) {
  const std::string backward_name = name + "_backward";
  OpDef d = NewOp(name, "activation", {"input"}, dtypes, Marking::kDifferentiable);
  d.attrs = attrs;
  d.infer = std::move(infer);
  d.backward = [backward_name, saved](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    const Tensor& v = saved == Saved::kOutput ? g.outputs[0] : g.inputs[0];
    ASSIGN_OR_RETURN(Tensor gx, g.run.Run1(backward_name, {g.grad_outputs[0], v}, g.attrs.map()));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(d));

  OpDef b = NewInternalOp(backward_name, "activation",
                          {"grad_output", saved == Saved::kOutput ? "output" : "input"}, kFloat);
  b.attrs = std::move(attrs);
  b.promote_from = 0;
  b.infer = BroadcastInfer(backward_name);
  b.doc = "gradient of " + name + " (used by its backward rule)";
  MustAdd(r, std::move(b));
}

}  // namespace ops

namespace {
using namespace ops;
using Metas = absl::StatusOr<std::vector<TensorMeta>>;

// SameAs(0) after `check` accepts the attributes.
template <typename Check>
InferFn CheckedSame(Check check) {
  return [check](absl::Span<const TensorMeta> in, const Attrs& a) -> Metas {
    RETURN_IF_ERROR(check(a));
    return std::vector<TensorMeta>{in[0]};
  };
}

absl::Status FloatAttrError(const std::string& op, const std::string& attr, double value,
                            const std::string& what) {
  return WithMetadata(AttrError(op, attr, absl::StrCat(what, ", got ", value)),
                      {{"value", absl::StrCat(value)}});
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
  // The rest take float inputs and save their input.
  auto add = [&r](const std::string& name, InferFn infer, std::vector<AttrSpec> attrs = {}) {
    AddPointwise(r, name, kFloat, std::move(infer), Saved::kInput, std::move(attrs));
  };
  add("relu6", same);
  add("selu", same);
  add("celu", CheckedSame([](const Attrs& a) -> absl::Status {
        const double alpha = a.GetFloat("alpha");
        if (alpha == 0) return FloatAttrError("celu", "alpha", alpha, "must not be 0");
        return absl::OkStatus();
      }),
      {FloatAttr("alpha", 1.0)});
  add("mish", same);
  add("softsign", same);
  add("hardsigmoid", same);
  add("hardswish", same);
  add("hardtanh", CheckedSame([](const Attrs& a) -> absl::Status {
        const double lo = a.GetFloat("min_val"), hi = a.GetFloat("max_val");
        if (lo > hi) {
          return WithMetadata(
              AttrError("hardtanh", "min_val",
                        absl::StrCat("cannot be greater than max_val, got ", lo, " > ", hi)),
              {{"value", absl::StrCat(lo)}});
        }
        return absl::OkStatus();
      }),
      {FloatAttr("min_val", -1.0), FloatAttr("max_val", 1.0)});
  add("logsigmoid", same);
  add("tanhshrink", same);
  add("softshrink", CheckedSame([](const Attrs& a) -> absl::Status {
        const double lambd = a.GetFloat("lambd");
        if (!(lambd >= 0)) {
          return FloatAttrError("softshrink", "lambd", lambd, "must be greater or equal to 0");
        }
        return absl::OkStatus();
      }),
      {FloatAttr("lambd", 0.5)});
  add("hardshrink", same, {FloatAttr("lambd", 0.5)});
  add("threshold", same, {RequiredFloatAttr("threshold"), RequiredFloatAttr("value")});
  RegisterActivationDimOps(r);
}

}  // namespace tensord
