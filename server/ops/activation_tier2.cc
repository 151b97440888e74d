// Tier-2 activations (torch.nn.functional names, attributes and defaults). Pointwise ones
// differentiate through fused internal `<name>_backward` ops like the tier-1 activations; prelu
// and glu have fused backward ops of their own; softmin is softmax of the negated input.
#include <cmath>

#include "server/ops/elementwise.h"
#include "server/ops/op_helpers.h"

namespace tensord {
namespace {
using namespace ops;
using Grads = absl::StatusOr<std::vector<Tensor>>;
using Metas = absl::StatusOr<std::vector<TensorMeta>>;

constexpr int kTier = 2;

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

// torch.nn.functional.prelu: `weight` holds one slope, or one per channel (dim 1; an input of
// rank 1 has one channel), and must match the input's dtype (torch does not promote here).
Metas PreluInfer(absl::Span<const TensorMeta> in, const Attrs&) {
  const TensorMeta& x = in[0];
  const TensorMeta& w = in[1];
  if (w.dtype != x.dtype) {
    return WithMetadata(
        DtypeError("prelu", absl::StrCat("weight has dtype ", DTypeName(w.dtype), ", input ",
                                         DTypeName(x.dtype), " (no type promotion)")),
        {{"dtype", std::string(DTypeName(w.dtype))}, {"input_index", "1"}});
  }
  if (w.shape.size() > 1) {
    return WithMetadata(ShapeError("prelu", absl::StrCat("weight must be a scalar or 1-d, got "
                                                         "shape ",
                                                         ShapeToString(w.shape))),
                        {{"shape", ShapeToString(w.shape)}});
  }
  const int64_t count = NumElements(w.shape);
  if (count != 1) {
    if (x.shape.empty()) {
      return ShapeError("prelu", absl::StrCat("a 0-d input takes one weight, got ", count));
    }
    const int64_t channels = x.shape.size() > 1 ? x.shape[1] : 1;
    if (count != channels) {
      return WithMetadata(
          ShapeError("prelu",
                     absl::StrCat("weight has ", count, " elements but input of shape ",
                                  ShapeToString(x.shape), " has ", channels, " channels (dim 1)")),
          {{"shape", ShapeToString(x.shape)}});
    }
  }
  return std::vector<TensorMeta>{x};
}

void AddPrelu(OpRegistry& r) {
  OpDef d;
  d.name = "prelu";
  d.category = "activation";
  d.tier = kTier;
  d.min_inputs = d.max_inputs = 2;
  d.input_names = {"input", "weight"};
  d.dtypes = kFloat;
  d.marking = Marking::kDifferentiable;
  d.infer = PreluInfer;
  d.backward = [](const GradContext& g) -> Grads {
    return g.run.Run("prelu_backward", {g.grad_outputs[0], g.inputs[0], g.inputs[1]});
  };
  MustAdd(r, std::move(d));

  // (grad_output, input, weight) → (grad_input, grad_weight), grad_weight already summed over
  // everything but the channel so that it has the weight's shape.
  OpDef b;
  b.name = "prelu_backward";
  b.category = "activation";
  b.tier = kTier;
  b.min_inputs = b.max_inputs = 3;
  b.input_names = {"grad_output", "input", "weight"};
  b.dtypes = kFloat;
  b.infer = [](absl::Span<const TensorMeta> in, const Attrs&) -> Metas {
    return std::vector<TensorMeta>{in[1], in[2]};
  };
  b.internal = true;
  b.doc = "gradient of prelu (used by its backward rule)";
  MustAdd(r, std::move(b));
}

// glu halves `dim`: the first half gated by the sigmoid of the second.
Metas GluInfer(absl::Span<const TensorMeta> in, const Attrs& a) {
  const Shape& s = in[0].shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank == 0) {
    return ShapeError("glu", "a 0-d input cannot be halved");
  }
  const int64_t dim = a.GetInt("dim", -1);
  auto d = NormalizeDim(dim, rank);
  if (!d.ok()) {
    return WithMetadata(
        AttrError("glu", "dim",
                  absl::StrCat("is ", dim, ", out of range for a tensor of rank ", rank)),
        {{"value", absl::StrCat(dim)}, {"rank", absl::StrCat(rank)}});
  }
  if (s[*d] % 2 != 0) {
    return WithMetadata(
        ShapeError("glu", absl::StrCat("halving dimension ", *d, " must be even, but it is ", s[*d],
                                       " in shape ", ShapeToString(s))),
        {{"shape", ShapeToString(s)}});
  }
  Shape out = s;
  out[*d] /= 2;
  return std::vector<TensorMeta>{{in[0].dtype, out}};
}

void AddGlu(OpRegistry& r) {
  OpDef d;
  d.name = "glu";
  d.category = "activation";
  d.tier = kTier;
  d.input_names = {"input"};
  d.attrs = {IntAttr("dim", -1)};
  d.dtypes = kFloat;
  d.marking = Marking::kDifferentiable;
  d.infer = GluInfer;
  d.backward = [](const GradContext& g) -> Grads {
    ASSIGN_OR_RETURN(Tensor gx,
                     g.run.Run1("glu_backward", {g.grad_outputs[0], g.inputs[0]}, g.attrs.map()));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(d));

  OpDef b;
  b.name = "glu_backward";
  b.category = "activation";
  b.tier = kTier;
  b.min_inputs = b.max_inputs = 2;
  b.input_names = {"grad_output", "input"};
  b.attrs = {IntAttr("dim", -1)};
  b.dtypes = kFloat;
  b.infer = [](absl::Span<const TensorMeta> in, const Attrs&) -> Metas {
    return std::vector<TensorMeta>{in[1]};
  };
  b.internal = true;
  b.doc = "gradient of glu (used by its backward rule)";
  MustAdd(r, std::move(b));
}

// softmin(x) = softmax(-x): a composite, so its gradient is softmax's and neg's.
void AddSoftmin(OpRegistry& r) {
  OpDef d;
  d.name = "softmin";
  d.category = "activation";
  d.tier = kTier;
  d.input_names = {"input"};
  d.attrs = {RequiredIntAttr("dim"), DTypeAttr("dtype")};
  d.dtypes = kFloat;
  d.marking = Marking::kDifferentiable;
  d.composite = [](OpRunner& run, absl::Span<const Tensor> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<Tensor>> {
    // Checked here so that errors name softmin rather than the softmax it runs.
    RETURN_IF_ERROR(SoftmaxInfer("softmin")({in[0].meta()}, a).status());
    ASSIGN_OR_RETURN(Tensor neg, run.Run1("neg", {in[0]}));
    return run.Run("softmax", {neg}, a.map());
  };
  MustAdd(r, std::move(d));
}

}  // namespace

void RegisterActivationTier2Ops(OpRegistry& r) {
  const InferFn same = SameAs(0);
  auto add = [&r](const std::string& name, InferFn infer, std::vector<AttrSpec> attrs = {}) {
    AddPointwise(r, name, kFloat, std::move(infer), Saved::kInput, std::move(attrs), kTier);
  };
  add("relu6", same);
  add("selu", same);
  add("celu", CheckedSame([](const Attrs& a) -> absl::Status {
        const double alpha = a.GetFloat("alpha", 1.0);
        if (alpha == 0) return FloatAttrError("celu", "alpha", alpha, "must not be 0");
        return absl::OkStatus();
      }),
      {FloatAttr("alpha", 1.0)});
  add("mish", same);
  add("softsign", same);
  add("hardsigmoid", same);
  add("hardswish", same);
  add("hardtanh", CheckedSame([](const Attrs& a) -> absl::Status {
        const double lo = a.GetFloat("min_val", -1.0), hi = a.GetFloat("max_val", 1.0);
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
        const double lambd = a.GetFloat("lambd", 0.5);
        if (!(lambd >= 0)) {
          return FloatAttrError("softshrink", "lambd", lambd, "must be greater or equal to 0");
        }
        return absl::OkStatus();
      }),
      {FloatAttr("lambd", 0.5)});
  add("hardshrink", same, {FloatAttr("lambd", 0.5)});
  add("threshold", same, {RequiredFloatAttr("threshold"), RequiredFloatAttr("value")});
  AddPrelu(r);
  AddGlu(r);
  AddSoftmin(r);
}

}  // namespace tensord
