// Regression and binary-classification losses: mse_loss, l1_loss, binary_cross_entropy,
// binary_cross_entropy_with_logits. Each is a composite of an elementwise loss (a primitive
// with its own kernel and gradient where no existing op expresses it) and the mean/sum
// reductions, so autodiff and BALANCED recomputation come from the constituents.
// cross_entropy and nll_loss live in loss_cross_entropy.cc.
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/reduction.h"

namespace tensord {
namespace {
using namespace ops;

absl::Status SameShapes(const std::string& op, absl::Span<const TensorMeta> in) {
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].shape != in[0].shape) {
      return ShapeError(op, absl::StrCat("input ", i, " has shape ", ShapeToString(in[i].shape),
                                         ", input 0 has shape ", ShapeToString(in[0].shape)));
    }
    if (in[i].dtype != in[0].dtype) {
      return DtypeError(op, absl::StrCat("input ", i, " has dtype ", DTypeName(in[i].dtype),
                                         ", input 0 has dtype ", DTypeName(in[0].dtype)));
    }
  }
  return absl::OkStatus();
}

// SHAPE_MISMATCH unless `t` broadcasts to `shape` without growing it (weights, pos_weight).
absl::Status CheckBroadcastsTo(const std::string& op, const std::string& what, const Tensor& t,
                               const Shape& shape) {
  auto b = BroadcastShapes(t.shape(), shape);
  if (!b.ok() || *b != shape) {
    return ShapeError(
        op, absl::StrCat(what, " of shape ", ShapeToString(t.shape()),
                         " does not broadcast to the input shape ", ShapeToString(shape)));
  }
  return absl::OkStatus();
}

absl::Status CheckTargetShape(const std::string& op, const Tensor& input, const Tensor& target) {
  if (input.shape() == target.shape()) return absl::OkStatus();
  return ShapeError(op, absl::StrCat("target shape ", ShapeToString(target.shape()),
                                     " must equal the input shape ", ShapeToString(input.shape())));
}

std::vector<Tensor> One(Tensor t) { return {std::move(t)}; }

absl::StatusOr<std::vector<Tensor>> MseLoss(OpRunner& run, absl::Span<const Tensor> in,
                                            const Attrs& a) {
  ASSIGN_OR_RETURN(Tensor diff, run.Run1(opname::add, {in[0], in[1]}, {{"alpha", -1.0}}));
  ASSIGN_OR_RETURN(Tensor sq, run.Run1(opname::mul, {diff, diff}));
  ASSIGN_OR_RETURN(Tensor out, ApplyLossReduction(run, sq, a));
  return One(out);
}

absl::StatusOr<std::vector<Tensor>> L1Loss(OpRunner& run, absl::Span<const Tensor> in,
                                           const Attrs& a) {
  auto shape = BroadcastShapes(in[0].shape(), in[1].shape());
  if (!shape.ok()) return WithMetadata(shape.status(), {{"op", "l1_loss"}});
  ASSIGN_OR_RETURN(Tensor x, ExpandToShape(run, in[0], *shape));
  ASSIGN_OR_RETURN(Tensor t, ExpandToShape(run, in[1], *shape));
  ASSIGN_OR_RETURN(Tensor l, run.Run1(opname::l1_loss_elementwise, {x, t}));
  ASSIGN_OR_RETURN(Tensor out, ApplyLossReduction(run, l, a));
  return One(out);
}

absl::StatusOr<Tensor> Weighted(OpRunner& run, const std::string& op, const Tensor& loss,
                                absl::Span<const Tensor> in) {
  if (in.size() < 3) return loss;
  RETURN_IF_ERROR(CheckBroadcastsTo(op, "weight", in[2], in[0].shape()));
  return run.Run1(opname::mul, {loss, in[2]});
}

absl::StatusOr<std::vector<Tensor>> BceLoss(OpRunner& run, absl::Span<const Tensor> in,
                                            const Attrs& a) {
  RETURN_IF_ERROR(CheckTargetShape("binary_cross_entropy", in[0], in[1]));
  ASSIGN_OR_RETURN(Tensor l, run.Run1(opname::binary_cross_entropy_elementwise, {in[0], in[1]}));
  ASSIGN_OR_RETURN(l, Weighted(run, "binary_cross_entropy", l, in));
  ASSIGN_OR_RETURN(Tensor out, ApplyLossReduction(run, l, a));
  return One(out);
}

absl::StatusOr<std::vector<Tensor>> BceWithLogitsLoss(OpRunner& run, absl::Span<const Tensor> in,
                                                      const Attrs& a) {
  const std::string op = "binary_cross_entropy_with_logits";
  RETURN_IF_ERROR(CheckTargetShape(op, in[0], in[1]));
  std::vector<Tensor> args = {in[0], in[1]};
  if (in.size() > 3) {
    RETURN_IF_ERROR(CheckBroadcastsTo(op, "pos_weight", in[3], in[0].shape()));
    ASSIGN_OR_RETURN(Tensor pw, ExpandToShape(run, in[3], in[0].shape()));
    args.push_back(pw);
  }
  ASSIGN_OR_RETURN(Tensor l, run.Run1(op + "_elementwise", args));
  ASSIGN_OR_RETURN(l, Weighted(run, op, l, in));
  ASSIGN_OR_RETURN(Tensor out, ApplyLossReduction(run, l, a));
  return One(out);
}

}  // namespace

absl::Status CheckProbabilities(const Tensor& x) {
  absl::Status status = absl::OkStatus();
  TENSORD_DISPATCH_FLOAT(x.dtype(), [&] {
    const T* p = x.data<T>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) {
      if (!(p[i] >= 0 && p[i] <= 1)) {
        status = Error(Reason::kInvalidRequest,
                       absl::StrCat("binary_cross_entropy: all elements of input should be "
                                    "between 0 and 1 (probabilities), got ",
                                    static_cast<double>(p[i]), " at flat index ", i),
                       {{"op", "binary_cross_entropy"},
                        {"value", absl::StrCat(static_cast<double>(p[i]))},
                        {"index", absl::StrCat(i)}});
        return;
      }
    }
  });
  return status;
}

OpDef ElementwiseLoss(const std::string& name, int min_inputs, int max_inputs,
                      std::vector<std::string> input_names, std::vector<AttrSpec> attrs) {
  OpDef d = NewInternalOp(name, "loss", std::move(input_names), kFloat, Marking::kDifferentiable);
  d.min_inputs = min_inputs;
  d.max_inputs = max_inputs;
  d.attrs = std::move(attrs);
  d.infer = [name](absl::Span<const TensorMeta> in,
                   const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(SameShapes(name, in));
    return std::vector<TensorMeta>{in[0]};
  };
  const std::string backward = name + "_backward";
  d.backward = [backward](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    std::vector<Tensor> args = {g.grad_outputs[0]};
    args.insert(args.end(), g.inputs.begin(), g.inputs.end());
    return g.run.Run(backward, std::move(args), g.attrs.map());
  };
  return d;
}

OpDef ElementwiseLossBackward(const std::string& forward, int min_inputs, int max_inputs,
                              std::vector<AttrSpec> attrs) {
  OpDef d = NewInternalOp(forward + "_backward", "loss", {}, kFloat);
  d.min_inputs = min_inputs + 1;
  d.max_inputs = max_inputs + 1;
  d.attrs = std::move(attrs);
  d.infer = [name = d.name](absl::Span<const TensorMeta> in,
                            const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(SameShapes(name, in));
    return std::vector<TensorMeta>(in.size() - 1, in[0]);
  };
  return d;
}

OpDef LossOp(const std::string& name, int min_inputs, int max_inputs,
             std::vector<std::string> input_names) {
  OpDef d = NewOp(name, "loss", std::move(input_names), kFloat, Marking::kDifferentiable);
  d.min_inputs = min_inputs;
  d.max_inputs = max_inputs;
  d.attrs = {LossReductionAttr()};
  d.promote_from = 0;  // every tensor operand is a float of the input's dtype
  return d;
}

absl::StatusOr<Tensor> ExpandToShape(OpRunner& run, const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  return run.Run1(opname::expand, {t}, {{"size", shape}});
}

AttrSpec LossReductionAttr() { return StringAttr("reduction", "mean", {"none", "mean", "sum"}); }

absl::StatusOr<Tensor> ApplyLossReduction(OpRunner& run, const Tensor& loss, const Attrs& attrs) {
  const std::string reduction = attrs.GetString("reduction");
  if (reduction == "none") return loss;
  return run.Run1(reduction, {loss});  // "mean" or "sum"
}

void RegisterLossOps(OpRegistry& r) {
  OpDef mse = LossOp("mse_loss", 2, 2, {"input", "target"});
  mse.doc = "(input - target)^2, broadcast, then reduced";
  mse.composite = MseLoss;
  MustAdd(r, std::move(mse));

  OpDef l1 = LossOp("l1_loss", 2, 2, {"input", "target"});
  l1.doc = "|input - target|, broadcast, then reduced";
  l1.composite = L1Loss;
  MustAdd(r, std::move(l1));

  OpDef bce = LossOp("binary_cross_entropy", 2, 3, {"input", "target", "weight"});
  bce.doc = "input: probabilities in [0, 1]; log terms clamped at -100 like PyTorch";
  bce.composite = BceLoss;
  MustAdd(r, std::move(bce));

  OpDef bcel =
      LossOp("binary_cross_entropy_with_logits", 2, 4, {"input", "target", "weight", "pos_weight"});
  bcel.doc =
      "input: logits (stable log-sigmoid form). Optional inputs are positional: to give "
      "pos_weight without a weight, pass 1.0 as the weight";
  bcel.composite = BceWithLogitsLoss;
  MustAdd(r, std::move(bcel));

  MustAdd(r, ElementwiseLoss("l1_loss_elementwise", 2, 2, {"input", "target"}));
  MustAdd(r, ElementwiseLossBackward("l1_loss_elementwise", 2, 2));
  MustAdd(r, ElementwiseLoss("binary_cross_entropy_elementwise", 2, 2, {"input", "target"}));
  MustAdd(r, ElementwiseLossBackward("binary_cross_entropy_elementwise", 2, 2));
  MustAdd(r, ElementwiseLoss("binary_cross_entropy_with_logits_elementwise", 2, 3,
                             {"input", "target", "pos_weight"}));
  MustAdd(r, ElementwiseLossBackward("binary_cross_entropy_with_logits_elementwise", 2, 3));

  RegisterCrossEntropyOps(r);
  RegisterLossDistanceOps(r);
}

}  // namespace tensord
