// cross_entropy and nll_loss. Class-index targets go through one internal primitive,
// cross_entropy_nll (the weighted negative log-likelihood with PyTorch's label smoothing and
// ignore_index), applied to an internal log-softmax; probability targets are composed from
// mul/add/sum/mean. Class weights are supported; they receive no gradient (as in PyTorch).
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/reduction.h"

namespace tensord {
namespace {
using namespace ops;

AttrSpec IgnoreIndexAttr() { return IntAttr("ignore_index", -100); }

int64_t ClassDim(const Shape& input) { return input.size() == 1 ? 0 : 1; }

// Checks the operands of a class-index loss: input [C] or [N, C, d1...], target [] or
// [N, d1...] of class indices, optional weight [C] of the input's dtype.
absl::Status CheckClassTarget(const std::string& op, absl::Span<const TensorMeta> in) {
  const Shape& x = in[0].shape;
  if (x.empty()) {
    return ShapeError(op, "input must have 1 or more dims ([C] or [N, C, ...]), got a 0-d tensor");
  }
  if (!IsIndexInt(in[1].dtype)) {
    return DtypeError(op, absl::StrCat("target must hold class indices (i32 or i64), got ",
                                       DTypeName(in[1].dtype)));
  }
  Shape expected;
  if (x.size() > 1) {
    expected.push_back(x[0]);
    expected.insert(expected.end(), x.begin() + 2, x.end());
  }
  if (in[1].shape != expected) {
    return ShapeError(op, absl::StrCat("target shape ", ShapeToString(in[1].shape),
                                       " does not match input shape ", ShapeToString(x),
                                       " (expected target shape ", ShapeToString(expected), ")"));
  }
  if (in.size() > 2) {
    const int64_t classes = x[ClassDim(x)];
    if (in[2].shape != Shape{classes}) {
      return ShapeError(op, absl::StrCat("weight must have shape [", classes, "], got ",
                                         ShapeToString(in[2].shape)));
    }
    if (in[2].dtype != in[0].dtype) {
      return DtypeError(op, absl::StrCat("weight has dtype ", DTypeName(in[2].dtype),
                                         ", input has dtype ", DTypeName(in[0].dtype)));
    }
  }
  return absl::OkStatus();
}

std::vector<TensorMeta> Metas(absl::Span<const Tensor> in) {
  std::vector<TensorMeta> m;
  for (const Tensor& t : in) m.push_back(t.meta());
  return m;
}

// The optional class weight in the input's dtype (weights are constants for autodiff).
absl::StatusOr<std::vector<Tensor>> WithWeight(const std::string& op, OpRunner& run,
                                               absl::Span<const Tensor> in,
                                               std::vector<Tensor> args) {
  if (in.size() < 3) return args;
  Tensor w = in[2];
  if (!IsFloat(w.dtype())) {
    return DtypeError(
        op, absl::StrCat("class weights must be floating point, got ", DTypeName(w.dtype())));
  }
  if (w.dtype() != in[0].dtype()) {
    ASSIGN_OR_RETURN(w, run.Run1(opname::to_dtype, {w.Detached()},
                                 {{"dtype", std::string(DTypeName(in[0].dtype()))}}));
  }
  args.push_back(w);
  return args;
}

absl::StatusOr<std::vector<Tensor>> NllLoss(OpRunner& run, absl::Span<const Tensor> in,
                                            const Attrs& a) {
  ASSIGN_OR_RETURN(std::vector<Tensor> args, WithWeight("nll_loss", run, in, {in[0], in[1]}));
  return run.Run(opname::cross_entropy_nll, std::move(args),
                 {{"ignore_index", a.GetInt("ignore_index")},
                  {"reduction", a.GetString("reduction")},
                  {"loss", std::string("nll_loss")}});
}

// -sum_c(log_softmax(x) * target [* weight]) over the class dim, PyTorch's soft-label form.
absl::StatusOr<Tensor> ProbabilityTargetLoss(OpRunner& run, absl::Span<const Tensor> in,
                                             const Attrs& a) {
  const std::string op = "cross_entropy";
  const Shape& shape = in[0].shape();
  const int64_t cdim = ClassDim(shape);
  const int64_t classes = shape[cdim];
  if (!IsFloat(in[1].dtype()) || in[1].dtype() != in[0].dtype()) {
    return DtypeError(op,
                      absl::StrCat("a target of class probabilities (same shape as the "
                                   "input) must have the input's dtype ",
                                   DTypeName(in[0].dtype()), ", got ", DTypeName(in[1].dtype())));
  }
  if (a.GetInt("ignore_index") >= 0) {
    return AttrError(op, "ignore_index", "is not supported with class-probability targets");
  }
  if (in.size() > 2 && in[2].shape() != Shape{classes}) {
    return ShapeError(op, absl::StrCat("weight must have shape [", classes, "], got ",
                                       ShapeToString(in[2].shape())));
  }
  ASSIGN_OR_RETURN(Tensor logp,
                   run.Run1(opname::cross_entropy_log_softmax, {in[0]}, {{"dim", cdim}}));
  Tensor target = in[1];
  const double ls = a.GetFloat("label_smoothing");
  if (ls > 0) {
    ASSIGN_OR_RETURN(target, run.Run1(opname::mul, {target, GradOps::Scalar(1.0 - ls)}));
    ASSIGN_OR_RETURN(target, run.Run1(opname::add, {target, GradOps::Scalar(ls / classes)}));
  }
  ASSIGN_OR_RETURN(Tensor prod, run.Run1(opname::mul, {logp, target}));
  if (in.size() > 2) {
    Shape w_shape(shape.size(), 1);
    w_shape[cdim] = classes;
    ASSIGN_OR_RETURN(std::vector<Tensor> w, WithWeight(op, run, in, {}));
    ASSIGN_OR_RETURN(Tensor wv, run.Run1(opname::reshape, {w[0].Detached()}, {{"shape", w_shape}}));
    ASSIGN_OR_RETURN(prod, run.Run1(opname::mul, {prod, wv}));
  }
  ASSIGN_OR_RETURN(Tensor per_sample,
                   run.Run1(opname::sum, {prod}, {{"dim", std::vector<int64_t>{cdim}}}));
  ASSIGN_OR_RETURN(per_sample, run.Run1(opname::mul, {per_sample, GradOps::Scalar(-1.0)}));
  return ApplyLossReduction(run, per_sample, a);
}

absl::StatusOr<std::vector<Tensor>> CrossEntropy(OpRunner& run, absl::Span<const Tensor> in,
                                                 const Attrs& a) {
  const std::string op = "cross_entropy";
  if (in[0].rank() == 0) {
    return ShapeError(op, "input must have 1 or more dims ([C] or [N, C, ...]), got a 0-d tensor");
  }
  const double ls = a.GetFloat("label_smoothing");
  if (!(ls >= 0.0 && ls <= 1.0)) {
    return AttrError(op, "label_smoothing", absl::StrCat("must be in [0, 1], got ", ls));
  }
  if (in[1].shape() == in[0].shape()) {
    ASSIGN_OR_RETURN(Tensor out, ProbabilityTargetLoss(run, in, a));
    return std::vector<Tensor>{out};
  }
  RETURN_IF_ERROR(CheckClassTarget(op, Metas(in.subspan(0, 2))));
  const int64_t cdim = ClassDim(in[0].shape());
  ASSIGN_OR_RETURN(Tensor logp,
                   run.Run1(opname::cross_entropy_log_softmax, {in[0]}, {{"dim", cdim}}));
  ASSIGN_OR_RETURN(std::vector<Tensor> args, WithWeight(op, run, in, {logp, in[1]}));
  return run.Run(opname::cross_entropy_nll, std::move(args),
                 {{"ignore_index", a.GetInt("ignore_index")},
                  {"reduction", a.GetString("reduction")},
                  {"label_smoothing", ls},
                  {"loss", op}});
}

OpDef PublicLoss(const std::string& name) {
  OpDef d = NewOp(name, "loss", {"input", "target", "weight"}, kFloat, Marking::kDifferentiable);
  d.min_inputs = 2;
  d.attrs = {IgnoreIndexAttr(), LossReductionAttr()};
  return d;
}

// Attributes of the internal NLL primitive and its gradient; `loss` names the public op in
// error messages.
std::vector<AttrSpec> NllAttrs() {
  return {IgnoreIndexAttr(), LossReductionAttr(), FloatAttr("label_smoothing", 0.0),
          StringAttr("loss", "nll_loss")};
}

}  // namespace

absl::Status CheckClassIndex(const std::string& loss, int64_t t, int64_t classes,
                             int64_t ignore_index) {
  if (t == ignore_index || (t >= 0 && t < classes)) return absl::OkStatus();
  return Error(
      Reason::kIndexOutOfRange,
      absl::StrCat(loss, ": target value ", t, " is out of range for ", classes,
                   " classes (expected 0..", classes - 1, ", or ignore_index ", ignore_index, ")"),
      {{"op", loss}, {"value", absl::StrCat(t)}, {"num_classes", absl::StrCat(classes)}});
}

void RegisterCrossEntropyOps(OpRegistry& r) {
  OpDef nll = PublicLoss("nll_loss");
  nll.doc = "input: log-probabilities [C] or [N, C, d1...]; target: class indices";
  nll.composite = NllLoss;
  MustAdd(r, std::move(nll));

  OpDef ce = PublicLoss("cross_entropy");
  ce.attrs.push_back(FloatAttr("label_smoothing", 0.0));
  ce.doc =
      "input: logits [C] or [N, C, d1...]; target: class indices [N, d1...] or class "
      "probabilities (the input's shape)";
  ce.composite = CrossEntropy;
  MustAdd(r, std::move(ce));

  OpDef lsm = NewInternalOp("cross_entropy_log_softmax", "loss", {"input"}, kFloat,
                            Marking::kDifferentiable);
  lsm.attrs = {RequiredIntAttr("dim")};
  lsm.infer = [](absl::Span<const TensorMeta> in,
                 const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(
        NormalizeDimFor("cross_entropy_log_softmax", a.GetInt("dim"), in[0].shape.size()).status());
    return std::vector<TensorMeta>{in[0]};
  };
  lsm.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::cross_entropy_log_softmax_backward,
                                     {g.grad_outputs[0], g.outputs[0]}, g.attrs.map()));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(lsm));

  OpDef lsm_back =
      NewInternalOp("cross_entropy_log_softmax_backward", "loss", {"grad", "output"}, kFloat);
  lsm_back.attrs = {RequiredIntAttr("dim")};
  lsm_back.infer = [](absl::Span<const TensorMeta> in,
                      const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    if (in[0].shape != in[1].shape || in[0].dtype != in[1].dtype) {
      return ShapeError("cross_entropy_log_softmax_backward", "grad and output differ");
    }
    return std::vector<TensorMeta>{in[0]};
  };
  MustAdd(r, std::move(lsm_back));

  OpDef nll_prim = NewInternalOp("cross_entropy_nll", "loss", {"log_probs", "target", "weight"},
                                 kFloat, Marking::kDifferentiable);
  nll_prim.min_inputs = 2;
  nll_prim.attrs = NllAttrs();
  nll_prim.infer = [](absl::Span<const TensorMeta> in,
                      const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(CheckClassTarget(a.GetString("loss"), in));
    Shape out = a.GetString("reduction") == "none" ? in[1].shape : Shape{};
    return std::vector<TensorMeta>{{in[0].dtype, out}};
  };
  nll_prim.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    std::vector<Tensor> args = {g.grad_outputs[0]};
    args.insert(args.end(), g.inputs.begin(), g.inputs.end());
    ASSIGN_OR_RETURN(
        Tensor gx, g.run.Run1(opname::cross_entropy_nll_backward, std::move(args), g.attrs.map()));
    std::vector<Tensor> grads(g.inputs.size());  // none for the target or the class weights
    grads[0] = std::move(gx);
    return grads;
  };
  MustAdd(r, std::move(nll_prim));

  OpDef nll_back = NewInternalOp("cross_entropy_nll_backward", "loss",
                                 {"grad", "log_probs", "target", "weight"}, kFloat);
  nll_back.min_inputs = 3;
  nll_back.attrs = NllAttrs();
  nll_back.infer = [](absl::Span<const TensorMeta> in,
                      const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(CheckClassTarget(a.GetString("loss"), in.subspan(1)));
    return std::vector<TensorMeta>{in[1]};
  };
  MustAdd(r, std::move(nll_back));
}

}  // namespace tensord
