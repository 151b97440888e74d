// Distance and divergence losses: smooth_l1_loss, huber_loss and kl_div (an internal elementwise
// primitive each, with its own kernel and gradient, then the mean/sum reductions), and
// cosine_similarity, composed from norm, clamp, div, mul and sum. Operands broadcast, as in
// torch.nn.functional.
#include <cmath>

#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/reduction.h"

namespace tensord {
namespace {
using namespace ops;

// Both operands expanded to their broadcast shape.
absl::StatusOr<std::pair<Tensor, Tensor>> Broadcast2(OpRunner& run, const std::string& op,
                                                     const Tensor& a, const Tensor& b) {
  auto shape = BroadcastShapes(a.shape(), b.shape());
  if (!shape.ok()) {
    return ShapeError(
        op, absl::StrCat("input of shape ", ShapeToString(a.shape()), " and target of shape ",
                         ShapeToString(b.shape()), " do not broadcast"));
  }
  ASSIGN_OR_RETURN(Tensor x, ExpandToShape(run, a, *shape));
  ASSIGN_OR_RETURN(Tensor y, ExpandToShape(run, b, *shape));
  return std::make_pair(x, y);
}

absl::StatusOr<std::vector<Tensor>> SmoothL1Loss(OpRunner& run, absl::Span<const Tensor> in,
                                                 const Attrs& a) {
  const double beta = a.GetFloat("beta");
  if (!(beta >= 0)) {
    return AttrError("smooth_l1_loss", "beta", absl::StrCat("must be >= 0, got ", beta));
  }
  ASSIGN_OR_RETURN(auto xt, Broadcast2(run, "smooth_l1_loss", in[0], in[1]));
  Tensor l;
  // beta = 0 is the L1 loss (PyTorch dispatches it so, avoiding the 0/0 of the quadratic part).
  if (beta == 0) {
    ASSIGN_OR_RETURN(l, run.Run1(opname::l1_loss_elementwise, {xt.first, xt.second}));
  } else {
    ASSIGN_OR_RETURN(
        l, run.Run1(opname::smooth_l1_loss_elementwise, {xt.first, xt.second}, {{"beta", beta}}));
  }
  ASSIGN_OR_RETURN(Tensor out, ApplyLossReduction(run, l, a));
  return std::vector<Tensor>{out};
}

absl::StatusOr<std::vector<Tensor>> HuberLoss(OpRunner& run, absl::Span<const Tensor> in,
                                              const Attrs& a) {
  const double delta = a.GetFloat("delta");
  if (!(delta > 0)) {
    return AttrError("huber_loss", "delta", absl::StrCat("must be > 0, got ", delta));
  }
  ASSIGN_OR_RETURN(auto xt, Broadcast2(run, "huber_loss", in[0], in[1]));
  ASSIGN_OR_RETURN(Tensor l, run.Run1(opname::huber_loss_elementwise, {xt.first, xt.second},
                                      {{"delta", delta}}));
  ASSIGN_OR_RETURN(Tensor out, ApplyLossReduction(run, l, a));
  return std::vector<Tensor>{out};
}

// kl_div refuses integer and bool operands like torch.kl_div (no promotion to float), then
// computes in the common float dtype.
absl::StatusOr<std::vector<Tensor>> KlDiv(OpRunner& run, absl::Span<const Tensor> in,
                                          const Attrs& a) {
  const std::string op = "kl_div";
  if (!IsFloat(in[1].dtype())) {
    return DtypeError(op, absl::StrCat("target must be floating point (integer and bool "
                                       "operands are not supported), got ",
                                       DTypeName(in[1].dtype())));
  }
  Tensor x = in[0], t = in[1];
  const DType common = t.wrapped_number() ? x.dtype() : PromoteTypes(x.dtype(), t.dtype());
  for (Tensor* v : {&x, &t}) {
    if (v->dtype() == common) continue;
    ASSIGN_OR_RETURN(*v,
                     run.Run1(opname::to_dtype, {*v}, {{"dtype", std::string(DTypeName(common))}}));
  }
  ASSIGN_OR_RETURN(auto xt, Broadcast2(run, op, x, t));
  ASSIGN_OR_RETURN(Tensor l, run.Run1(opname::kl_div_elementwise, {xt.first, xt.second},
                                      {{"log_target", a.GetBool("log_target")}}));
  const std::string reduction = a.GetString("reduction");
  if (reduction != "batchmean") {
    ASSIGN_OR_RETURN(Tensor out, ApplyLossReduction(run, l, a));
    return std::vector<Tensor>{out};
  }
  // The sum divided by the batch size (the input's first dim; a 0-d input is one sample).
  ASSIGN_OR_RETURN(Tensor out, run.Run1(opname::sum, {l}));
  if (in[0].rank() > 0) {
    const double batch = static_cast<double>(in[0].shape()[0]);
    ASSIGN_OR_RETURN(out, run.Run1(opname::div, {out, GradOps::Scalar(batch)}));
  }
  return std::vector<Tensor>{out};
}

// The 2-norm of `x` over `dim` (kept), floored at eps in value only: like torch, which clamps
// the norms in place under no_grad, the gradient is that of the unclamped norm.
absl::StatusOr<Tensor> FlooredNorm(OpRunner& run, const Tensor& x, int64_t dim, double eps) {
  ASSIGN_OR_RETURN(Tensor n,
                   run.Run1(opname::norm, {x},
                            {{"p", 2.0}, {"dim", std::vector<int64_t>{dim}}, {"keepdim", true}}));
  ASSIGN_OR_RETURN(Tensor floored, run.Run1(opname::clamp, {n.Detached()}, {{"min", eps}}));
  ASSIGN_OR_RETURN(Tensor shift, run.Run1(opname::sub, {floored, n.Detached()}));
  return run.Run1(opname::add, {n, shift});
}

absl::StatusOr<std::vector<Tensor>> CosineSimilarity(OpRunner& run, absl::Span<const Tensor> in,
                                                     const Attrs& a) {
  const std::string op = "cosine_similarity";
  auto shape = BroadcastShapes(in[0].shape(), in[1].shape());
  if (!shape.ok()) {
    return ShapeError(
        op, absl::StrCat("x1 of shape ", ShapeToString(in[0].shape()), " and x2 of shape ",
                         ShapeToString(in[1].shape()), " do not broadcast"));
  }
  ASSIGN_OR_RETURN(int64_t dim, NormalizeDimFor(op, a.GetInt("dim"), shape->size()));
  const double eps = a.GetFloat("eps");
  std::vector<Tensor> unit;
  for (const Tensor& v : {in[0], in[1]}) {
    ASSIGN_OR_RETURN(Tensor e, ExpandToShape(run, v, *shape));
    ASSIGN_OR_RETURN(Tensor n, FlooredNorm(run, e, dim, eps));
    // Dividing each operand by its norm first keeps the result in [-1, 1] (PyTorch's order).
    ASSIGN_OR_RETURN(Tensor u, run.Run1(opname::div, {e, n}));
    unit.push_back(u);
  }
  ASSIGN_OR_RETURN(Tensor prod, run.Run1(opname::mul, {unit[0], unit[1]}));
  ASSIGN_OR_RETURN(Tensor out, run.Run1(opname::sum, {prod}, {{"dim", std::vector<int64_t>{dim}}}));
  return std::vector<Tensor>{out};
}

}  // namespace

void RegisterLossDistanceOps(OpRegistry& r) {
  OpDef smooth = LossOp("smooth_l1_loss", 2, 2, {"input", "target"});
  smooth.attrs.push_back(FloatAttr("beta", 1.0));
  smooth.doc = "0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target)";
  smooth.composite = SmoothL1Loss;
  MustAdd(r, std::move(smooth));

  OpDef huber = LossOp("huber_loss", 2, 2, {"input", "target"});
  huber.attrs.push_back(FloatAttr("delta", 1.0));
  huber.doc = "0.5 d^2 where |d| <= delta, else delta (|d| - 0.5 delta) (d = input - target)";
  huber.composite = HuberLoss;
  MustAdd(r, std::move(huber));

  OpDef kl = LossOp("kl_div", 2, 2, {"input", "target"});
  kl.promote_from = -1;  // integer targets are refused, not promoted
  kl.attrs = {StringAttr("reduction", "mean", {"none", "mean", "sum", "batchmean"}),
              BoolAttr("log_target", false)};
  kl.doc =
      "input: log-probabilities; target: probabilities (log-probabilities with log_target). "
      "target (log target - input) pointwise; batchmean divides the sum by input.shape[0]";
  kl.composite = KlDiv;
  MustAdd(r, std::move(kl));

  OpDef cos = LossOp("cosine_similarity", 2, 2, {"x1", "x2"});
  cos.attrs = {IntAttr("dim", 1), FloatAttr("eps", 1e-8)};
  cos.doc = "sum(x1 x2) / (max(|x1|, eps) max(|x2|, eps)) over dim, after broadcasting";
  cos.composite = CosineSimilarity;
  MustAdd(r, std::move(cos));

  MustAdd(r, ElementwiseLoss("smooth_l1_loss_elementwise", 2, 2, {"input", "target"},
                             {FloatAttr("beta", 1.0)}));
  MustAdd(r, ElementwiseLossBackward("smooth_l1_loss_elementwise", 2, 2, {FloatAttr("beta", 1.0)}));
  MustAdd(r, ElementwiseLoss("huber_loss_elementwise", 2, 2, {"input", "target"},
                             {FloatAttr("delta", 1.0)}));
  MustAdd(r, ElementwiseLossBackward("huber_loss_elementwise", 2, 2, {FloatAttr("delta", 1.0)}));
  MustAdd(r, ElementwiseLoss("kl_div_elementwise", 2, 2, {"input", "target"},
                             {BoolAttr("log_target", false)}));
  MustAdd(r, ElementwiseLossBackward("kl_div_elementwise", 2, 2, {BoolAttr("log_target", false)}));
}

}  // namespace tensord
