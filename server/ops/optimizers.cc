// Optimizer steps as fused in-place ops: one call updates a parameter and its optimizer state
// in one pass over the elements, where the same update written with assign takes a dozen
// calls. The state (momentum buffer, moment estimates, step count) is made of tensors of the
// session, as torch.optim keeps it in `optimizer.state[param]`; the formulas are those of
// torch.optim's single-tensor implementations (SGD, Adam, AdamW), term for term.
//
// Like assign they write into their inputs, so they are refused on autodiff tensors while
// recording and run in a no_grad batch (as torch.optim steps under torch.no_grad()); a failing
// batch restores the parameter and every state tensor (OpDef::in_place, mutates_inputs).
#include "server/ops/optimizers.h"

#include <cmath>

#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {

// The inputs every optimizer op shares: param, grad, then state tensors of the param's dtype
// and shape, and a 0-d step counter at `step_index` (-1: none in this call).
absl::Status CheckUpdateInputs(const std::string& op, absl::Span<const TensorMeta> in,
                               const std::vector<std::string>& names, int step_index) {
  const TensorMeta& param = in[0];
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].wrapped_number) {
      return Error(Reason::kBadOperand,
                   absl::StrCat(op, ": ", names[i], " (input ", i,
                                ") is a number; the optimizer reads and writes tensors of the "
                                "session, so pass a tensor"),
                   {{"op", op}, {"input_index", absl::StrCat(i)}});
    }
    if (static_cast<int>(i) == step_index) {
      if (!in[i].shape.empty() || in[i].dtype == DType::kBool || IsLowPrecision(in[i].dtype)) {
        return Error(
            Reason::kBadOperand,
            absl::StrCat(
                op, ": step (input ", i,
                ") must be a 0-d number tensor "
                "(f32, f64, i32 or i64) counting the steps taken, 0 before the first; got ",
                DTypeName(in[i].dtype), " ", ShapeToString(in[i].shape)),
            {{"op", op}, {"input_index", absl::StrCat(i)}});
      }
      continue;
    }
    if (i == 0) continue;
    if (in[i].shape != param.shape) {
      return Error(Reason::kShapeMismatch,
                   absl::StrCat(op, ": ", names[i], " has shape ", ShapeToString(in[i].shape),
                                " but param has shape ", ShapeToString(param.shape)),
                   {{"op", op},
                    {"input_index", absl::StrCat(i)},
                    {"shape", ShapeToString(in[i].shape)},
                    {"param_shape", ShapeToString(param.shape)}});
    }
    if (in[i].dtype != param.dtype) {
      return ops::DtypeError(
          op, absl::StrCat(names[i], " is ", DTypeName(in[i].dtype), " but param is ",
                           DTypeName(param.dtype), "; optimizer state has the param's dtype"));
    }
  }
  return absl::OkStatus();
}

constexpr double kInf = HUGE_VAL;

absl::Status CheckRange(const std::string& op, const Attrs& a, const std::string& name, double lo,
                        double hi, bool hi_open) {
  const double v = a.GetFloat(name);
  // Written so that NaN fails every test, as torch.optim's `if not 0.0 <= lr` does.
  const bool ok = v >= lo && (hi_open ? v < hi : v <= hi);
  if (ok) return absl::OkStatus();
  if (hi == kInf) return ops::AttrError(op, name, absl::StrCat("is ", v, "; it must be >= ", lo));
  if (lo == -kInf) return ops::AttrError(op, name, absl::StrCat("is ", v, "; it must be a number"));
  return ops::AttrError(
      op, name, absl::StrCat("is ", v, "; it must be in [", lo, ", ", hi, hi_open ? ")" : "]"));
}

absl::StatusOr<std::vector<TensorMeta>> InferSgd(absl::Span<const TensorMeta> in, const Attrs& a) {
  const std::string op = "sgd";
  RETURN_IF_ERROR(CheckRange(op, a, "lr", 0, kInf, false));
  RETURN_IF_ERROR(CheckRange(op, a, "momentum", 0, kInf, false));
  RETURN_IF_ERROR(CheckRange(op, a, "dampening", -kInf, kInf, false));
  RETURN_IF_ERROR(CheckRange(op, a, "weight_decay", 0, kInf, false));
  const double momentum = a.GetFloat("momentum");
  if (a.GetBool("nesterov") && (momentum <= 0 || a.GetFloat("dampening") != 0)) {
    return ops::AttrError(op, "nesterov", "needs a positive momentum and zero dampening");
  }
  if (in.size() == 3) {
    return Error(Reason::kBadOperand,
                 "sgd: takes param and grad, plus momentum_buffer and step with momentum; got "
                 "3 inputs",
                 {{"op", op}});
  }
  if (momentum != 0 && in.size() != 4) {
    return Error(Reason::kBadOperand,
                 absl::StrCat("sgd: momentum ", momentum,
                              " keeps state: pass momentum_buffer (any values, of param's "
                              "shape) and step (a 0-d tensor, 0 before the first step)"),
                 {{"op", op}, {"attribute", "momentum"}});
  }
  RETURN_IF_ERROR(CheckUpdateInputs(op, in, {"param", "grad", "momentum_buffer", "step"},
                                    in.size() == 4 ? 3 : -1));
  return std::vector<TensorMeta>{in[0]};
}

InferFn InferAdam(std::string op) {
  return [op](absl::Span<const TensorMeta> in,
              const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(CheckRange(op, a, "lr", 0, kInf, false));
    RETURN_IF_ERROR(CheckRange(op, a, "eps", 0, kInf, false));
    RETURN_IF_ERROR(CheckRange(op, a, "weight_decay", 0, kInf, false));
    const std::vector<double> betas = a.GetFloats("betas");
    if (betas.size() != 2) {
      return ops::AttrError(
          op, "betas", absl::StrCat("has ", betas.size(), " values; it takes two (beta1, beta2)"));
    }
    for (double b : betas) {
      if (!(b >= 0 && b < 1)) {
        return ops::AttrError(op, "betas", absl::StrCat("holds ", b, "; each must be in [0, 1)"));
      }
    }
    const bool amsgrad = a.GetBool("amsgrad");
    if (in.size() != (amsgrad ? 6u : 5u)) {
      return Error(Reason::kBadOperand,
                   absl::StrCat(op, ": takes param, grad, exp_avg, exp_avg_sq, step",
                                amsgrad ? " and max_exp_avg_sq (amsgrad=true)"
                                        : " (max_exp_avg_sq only with amsgrad=true)",
                                "; got ", in.size(), " inputs"),
                   {{"op", op}, {"attribute", "amsgrad"}});
    }
    RETURN_IF_ERROR(CheckUpdateInputs(
        op, in, {"param", "grad", "exp_avg", "exp_avg_sq", "step", "max_exp_avg_sq"}, 4));
    return std::vector<TensorMeta>{in[0]};
  };
}

OpDef AdamOp(const std::string& name, double weight_decay, const std::string& doc) {
  OpDef op = ops::NewOp(name, "optimizer",
                        {"param", "grad", "exp_avg", "exp_avg_sq", "step", "max_exp_avg_sq"},
                        kFloat, Marking::kNonDifferentiable);
  op.min_inputs = 5;
  op.attrs = {ops::FloatAttr("lr", 1e-3),
              {"betas", AttrType::kFloats, std::vector<double>{0.9, 0.999}},
              ops::FloatAttr("eps", 1e-8),
              ops::FloatAttr("weight_decay", weight_decay),
              ops::BoolAttr("amsgrad", false),
              ops::BoolAttr("maximize", false)};
  op.in_place = true;
  op.widen_storage_dtypes = false;
  op.view = true;  // the output is the param itself
  op.mutates_inputs = {2, 3, 4, 5};
  op.infer = InferAdam(name);
  op.doc = doc;
  return op;
}

}  // namespace

namespace ops {

absl::Status CheckOptimizerAliasing(const OpDef& op, absl::Span<const Tensor> inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (inputs[i].storage() == nullptr || inputs[i].storage() != inputs[j].storage()) continue;
      return Error(
          Reason::kBadOperand,
          absl::StrCat(op.name, ": ", op.input_names[i], " (input ", i, ") shares storage with ",
                       op.input_names[j], " (input ", j,
                       "); each state tensor must be a tensor of its own"),
          {{"op", op.name}, {"input_index", absl::StrCat(i)}, {"other_index", absl::StrCat(j)}});
    }
  }
  return absl::OkStatus();
}

AdamScalars AdamStepScalars(const Attrs& a, double step) {
  const std::vector<double> betas = a.GetFloats("betas");
  AdamScalars s{betas[0], betas[1], a.GetFloat("lr"), a.GetFloat("eps"), a.GetFloat("weight_decay"),
                0,        0};
  s.step_size = s.lr / (1 - std::pow(s.beta1, step));
  s.bias_correction2_sqrt = std::sqrt(1 - std::pow(s.beta2, step));
  return s;
}

}  // namespace ops

void RegisterOptimizerOps(OpRegistry& r) {
  OpDef sgd = ops::NewOp("sgd", "optimizer", {"param", "grad", "momentum_buffer", "step"}, kFloat,
                         Marking::kNonDifferentiable);
  sgd.min_inputs = 2;
  sgd.attrs = {ops::RequiredFloatAttr("lr"),     ops::FloatAttr("momentum", 0),
               ops::FloatAttr("dampening", 0),   ops::FloatAttr("weight_decay", 0),
               ops::BoolAttr("nesterov", false), ops::BoolAttr("maximize", false)};
  sgd.in_place = true;
  sgd.widen_storage_dtypes = false;
  sgd.view = true;
  sgd.mutates_inputs = {2, 3};
  sgd.infer = InferSgd;
  sgd.doc =
      "One torch.optim.SGD step in place: param -= lr * d, d the grad with weight decay, "
      "momentum (the buffer takes d itself at step 0) and Nesterov. With momentum, "
      "momentum_buffer and a 0-d step tensor are the state, and step is incremented. Run it in "
      "a no_grad batch; returns param.";
  MustAdd(r, std::move(sgd));

  MustAdd(r, AdamOp("adam", 0,
                    "One torch.optim.Adam step in place on param and its state exp_avg, "
                    "exp_avg_sq, step (0-d, incremented) and, with amsgrad, max_exp_avg_sq; "
                    "weight_decay is added to the gradient (L2). Run it in a no_grad batch; "
                    "returns param."));
  MustAdd(r, AdamOp("adamw", 1e-2,
                    "One torch.optim.AdamW step in place: as adam, with decoupled weight decay "
                    "(param *= 1 - lr * weight_decay before the update). Run it in a no_grad "
                    "batch; returns param."));
}

}  // namespace tensord
