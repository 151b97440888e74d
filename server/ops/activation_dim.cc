// Activations along a dim or with a weight (torch.nn.functional names, attributes and
// defaults): softmax and log_softmax compose their gradients from other ops, so every backend
// with those ops can run them; softmin is softmax of the negated input; prelu and glu have
// fused backward ops of their own.
#include <cmath>

#include "server/ops/elementwise.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace ops {

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
using Metas = absl::StatusOr<std::vector<TensorMeta>>;

// softmax / log_softmax over `dim`, optionally computed in `dtype` (torch's dtype argument).
OpDef Softmax(const std::string& name, BackwardFn backward) {
  OpDef d = NewOp(name, "activation", {"input"}, kFloat, Marking::kDifferentiable);
  d.attrs = {RequiredIntAttr("dim"), DTypeAttr("dtype")};
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
  ASSIGN_OR_RETURN(Tensor p, o.Op(opname::exp, {y}));
  ASSIGN_OR_RETURN(Tensor ps, o.Mul(p, s));
  ASSIGN_OR_RETURN(Tensor gx, o.Sub(go, ps));
  return std::vector<Tensor>{gx};
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
  OpDef d = NewOp("prelu", "activation", {"input", "weight"}, kFloat, Marking::kDifferentiable);
  d.infer = PreluInfer;
  d.backward = [](const GradContext& g) -> Grads {
    return g.run.Run(opname::prelu_backward, {g.grad_outputs[0], g.inputs[0], g.inputs[1]});
  };
  MustAdd(r, std::move(d));

  // (grad_output, input, weight) → (grad_input, grad_weight), grad_weight already summed over
  // everything but the channel so that it has the weight's shape.
  OpDef b =
      NewInternalOp("prelu_backward", "activation", {"grad_output", "input", "weight"}, kFloat);
  // The input and weight must be ones prelu takes, and the gradient shaped like the input.
  b.infer = [](absl::Span<const TensorMeta> in, const Attrs& a) -> Metas {
    RETURN_IF_ERROR(PreluInfer(in.subspan(1), a).status());
    if (in[0].shape != in[1].shape || in[0].dtype != in[1].dtype) {
      return ShapeError("prelu_backward",
                        absl::StrCat("output gradient ", ShapeToString(in[0].shape),
                                     " does not match the input ", ShapeToString(in[1].shape)));
    }
    return std::vector<TensorMeta>{in[1], in[2]};
  };
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
  const int64_t dim = a.GetInt("dim");
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
  OpDef d = NewOp("glu", "activation", {"input"}, kFloat, Marking::kDifferentiable);
  d.attrs = {IntAttr("dim", -1)};
  d.infer = GluInfer;
  d.backward = [](const GradContext& g) -> Grads {
    ASSIGN_OR_RETURN(Tensor gx, g.run.Run1(opname::glu_backward, {g.grad_outputs[0], g.inputs[0]},
                                           g.attrs.map()));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(d));

  OpDef b = NewInternalOp("glu_backward", "activation", {"grad_output", "input"}, kFloat);
  b.attrs = {IntAttr("dim", -1)};
  // The input must be one glu takes and the gradient shaped like glu's output of it.
  b.infer = [](absl::Span<const TensorMeta> in, const Attrs& a) -> Metas {
    ASSIGN_OR_RETURN(std::vector<TensorMeta> out, GluInfer(in.subspan(1), a));
    if (in[0].shape != out[0].shape || in[0].dtype != in[1].dtype) {
      return ShapeError("glu_backward",
                        absl::StrCat("output gradient ", ShapeToString(in[0].shape),
                                     " does not match glu's output ", ShapeToString(out[0].shape)));
    }
    return std::vector<TensorMeta>{in[1]};
  };
  b.doc = "gradient of glu (used by its backward rule)";
  MustAdd(r, std::move(b));
}

// softmin(x) = softmax(-x): a composite, so its gradient is softmax's and neg's.
void AddSoftmin(OpRegistry& r) {
  OpDef d = NewOp("softmin", "activation", {"input"}, kFloat, Marking::kDifferentiable);
  d.attrs = {RequiredIntAttr("dim"), DTypeAttr("dtype")};
  d.composite = [](OpRunner& run, absl::Span<const Tensor> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<Tensor>> {
    // Checked here so that errors name softmin rather than the softmax it runs.
    RETURN_IF_ERROR(SoftmaxInfer("softmin")({in[0].meta()}, a).status());
    ASSIGN_OR_RETURN(Tensor neg, run.Run1(opname::neg, {in[0]}));
    return run.Run(opname::softmax, {neg}, a.map());
  };
  MustAdd(r, std::move(d));
}

}  // namespace

void RegisterActivationDimOps(OpRegistry& r) {
  MustAdd(r, Softmax("softmax", SoftmaxBackward));
  MustAdd(r, Softmax("log_softmax", LogSoftmaxBackward));
  AddPrelu(r);
  AddGlu(r);
  AddSoftmin(r);
}

}  // namespace tensord
