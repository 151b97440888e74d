// batch_norm and group_norm (torch.nn.functional semantics).
//
// batch_norm is a composite: the internal op native_batch_norm normalizes (and is what the tape
// records, so BALANCED checkpointing recomputes only the normalization), and the running
// statistics are then updated with `assign` from detached batch statistics. The update is
// therefore never recorded and never repeated by a recomputation, and gradients reach input,
// weight and bias only, as in PyTorch. OpDef::mutates_inputs tells the service to save the
// running statistics so that a failing batch restores them.
//
// group_norm is a composite over layer_norm: the groups of [N, C, *] are the rows of a
// [N, G, C/G * prod(*)] view, so it shares layer_norm's kernels (oneDNN for f32).
#include "absl/strings/str_cat.h"
#include "server/ops/linalg_products.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {
using namespace ops;

// ---- batch_norm -------------------------------------------------------------------------------

// Optional inputs are positional; a running statistic of shape [0] counts as absent, so weight
// and bias can be given without running statistics in training.
bool Given(absl::Span<const Tensor> in, size_t i) {
  return i < in.size() && !(in[i].rank() == 1 && in[i].dim(0) == 0);
}

absl::Status CheckChannelParam(const std::string& op, const char* what, const Tensor& t,
                               const Tensor& x, int64_t channels) {
  if (t.dtype() != x.dtype()) {
    return DtypeError(op, absl::StrCat(what, " is ", DTypeName(t.dtype()), " but input is ",
                                       DTypeName(x.dtype())));
  }
  if (t.shape() != Shape{channels}) {
    return ShapeError(op, absl::StrCat(what, " has shape ", ShapeToString(t.shape()), " but input ",
                                       ShapeToString(x.shape()), " has ", channels, " channels"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ChannelConstant(OpRunner& run, const Tensor& x, double value) {
  return run.Run1(
      "full", {},
      {{"shape", Shape{x.dim(1)}}, {"value", value}, {"dtype", std::string(DTypeName(x.dtype()))}});
}

// running = (1 - momentum) * running + momentum * batch, written into `running`'s storage.
absl::Status UpdateRunning(OpRunner& run, const Tensor& running, const Tensor& batch,
                           double momentum) {
  GradOps o(run);
  ASSIGN_OR_RETURN(Tensor kept, o.Scale(running.Detached(), 1.0 - momentum));
  ASSIGN_OR_RETURN(Tensor added, o.Scale(batch.Detached(), momentum));
  ASSIGN_OR_RETURN(Tensor updated, o.Add(kept, added));
  return run.Run(opname::assign, {running, updated}).status();
}

absl::StatusOr<std::vector<Tensor>> BatchNorm(OpRunner& run, absl::Span<const Tensor> in,
                                              const Attrs& a) {
  const std::string op = "batch_norm";
  const Tensor& x = in[0];
  const bool training = a.GetBool("training");
  const double momentum = a.GetFloat("momentum");
  const double eps = a.GetFloat("eps");
  if (x.rank() < 2) {
    return ShapeError(
        op, absl::StrCat("expects input [N, C, *] of rank >= 2, got ", ShapeToString(x.shape())));
  }
  if (eps < 0) return AttrError(op, "eps", absl::StrCat("must be non-negative, got ", eps));
  const int64_t channels = x.dim(1);
  static const char* kNames[] = {"input", "running_mean", "running_var", "weight", "bias"};
  for (size_t i = 1; i < in.size(); ++i) {
    if (Given(in, i) || i >= 3) {
      RETURN_IF_ERROR(CheckChannelParam(op, kNames[i], in[i], x, channels));
    }
  }
  const bool has_mean = Given(in, 1), has_var = Given(in, 2);
  if (!training && !(has_mean && has_var)) {
    return Error(Reason::kBadOperand,
                 absl::StrCat(op,
                              ": running_mean and running_var must be given when training is "
                              "false (evaluation uses them)"),
                 {{"op", op}});
  }
  const int64_t per_channel = channels > 0 ? x.numel() / channels : 0;
  if (training && per_channel == 1) {
    return ShapeError(op, absl::StrCat("expected more than 1 value per channel when training, got "
                                       "input of shape ",
                                       ShapeToString(x.shape())));
  }
  std::vector<Tensor> args = {x};
  if (in.size() > 3) {
    args.push_back(in[3]);
  } else {
    ASSIGN_OR_RETURN(Tensor ones, ChannelConstant(run, x, 1.0));
    args.push_back(ones);
  }
  if (in.size() > 4) {
    args.push_back(in[4]);
  } else {
    ASSIGN_OR_RETURN(Tensor zeros, ChannelConstant(run, x, 0.0));
    args.push_back(zeros);
  }
  if (!training) {
    args.push_back(in[1]);
    args.push_back(in[2]);
  }
  ASSIGN_OR_RETURN(std::vector<Tensor> outs, run.Run(opname::native_batch_norm, std::move(args),
                                                     {{"training", training}, {"eps", eps}}));
  // PyTorch leaves the running statistics alone for an empty batch.
  if (training && per_channel > 0) {
    if (has_mean) RETURN_IF_ERROR(UpdateRunning(run, in[1], outs[1], momentum));
    if (has_var) {
      // The running variance is the unbiased one.
      GradOps o(run);
      const double n = static_cast<double>(per_channel);
      ASSIGN_OR_RETURN(Tensor unbiased, o.Scale(outs[2].Detached(), n / (n - 1)));
      RETURN_IF_ERROR(UpdateRunning(run, in[2], unbiased, momentum));
    }
  }
  return std::vector<Tensor>{outs[0]};
}

absl::StatusOr<std::vector<TensorMeta>> NativeBatchNormInfer(absl::Span<const TensorMeta> in,
                                                             const Attrs& a) {
  const std::string op = "native_batch_norm";
  const bool training = a.GetBool("training");
  if (in[0].shape.size() < 2) {
    return ShapeError(op,
                      absl::StrCat("expects input [N, C, *], got ", ShapeToString(in[0].shape)));
  }
  if (in.size() != (training ? 3u : 5u)) {
    return ShapeError(op, absl::StrCat("takes (input, weight, bias", training ? "" : ", mean, var",
                                       ") when training is ", training ? "true" : "false"));
  }
  const TensorMeta stat{in[0].dtype, {in[0].shape[1]}};
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].dtype != stat.dtype || in[i].shape != stat.shape) {
      return ShapeError(op, absl::StrCat("input ", i, " must be ", DTypeName(stat.dtype),
                                         ShapeToString(stat.shape), ", got ",
                                         DTypeName(in[i].dtype), ShapeToString(in[i].shape)));
    }
  }
  // (output, mean, biased variance): the batch's when training, else the given ones.
  return std::vector<TensorMeta>{in[0], stat, stat};
}

absl::StatusOr<std::vector<Tensor>> NativeBatchNormBackward(const GradContext& g) {
  const bool training = g.attrs.GetBool("training");
  const Tensor& mean = training ? g.outputs[1] : g.inputs[3];
  const Tensor& var = training ? g.outputs[2] : g.inputs[4];
  ASSIGN_OR_RETURN(
      std::vector<Tensor> parts,
      g.run.Run(opname::native_batch_norm_backward,
                {g.grad_outputs[0], g.inputs[0], g.inputs[1], mean, var}, g.attrs.map()));
  std::vector<Tensor> grads(g.inputs.size());
  for (size_t i = 0; i < 3; ++i) {
    if (g.needs_input_grad[i]) grads[i] = parts[i];
  }
  return grads;
}

// ---- group_norm -------------------------------------------------------------------------------

absl::StatusOr<std::vector<Tensor>> GroupNorm(OpRunner& run, absl::Span<const Tensor> in,
                                              const Attrs& a) {
  const std::string op = "group_norm";
  const Tensor& x = in[0];
  const int64_t groups = a.GetInt("num_groups");
  if (x.rank() < 2) {
    return ShapeError(
        op, absl::StrCat("expects input [N, C, *] of rank >= 2, got ", ShapeToString(x.shape())));
  }
  const int64_t channels = x.dim(1);
  if (groups <= 0 || channels % groups != 0) {
    return Error(
        Reason::kBadAttribute,
        absl::StrCat(op, ": attribute 'num_groups' must be positive and divide the ", channels,
                     " channels of input ", ShapeToString(x.shape()), ", got ", groups),
        {{"op", op}, {"attribute", "num_groups"}, {"value", absl::StrCat(groups)}});
  }
  const double eps = a.GetFloat("eps");
  if (eps < 0) return AttrError(op, "eps", absl::StrCat("must be non-negative, got ", eps));
  static const char* kNames[] = {"input", "weight", "bias"};
  for (size_t i = 1; i < in.size(); ++i) {
    RETURN_IF_ERROR(CheckChannelParam(op, kNames[i], in[i], x, channels));
  }
  const int64_t batch = x.dim(0);
  int64_t spatial = 1;
  for (int d = 2; d < x.rank(); ++d) spatial *= x.dim(d);
  const int64_t row = channels / groups * spatial;
  GradOps o(run);
  ASSIGN_OR_RETURN(Tensor rows, o.Reshape(x, {batch, groups, row}));
  ASSIGN_OR_RETURN(Tensor normed,
                   o.Op(opname::layer_norm, {rows},
                        {{"normalized_shape", std::vector<int64_t>{row}}, {"eps", eps}}));
  ASSIGN_OR_RETURN(Tensor y, o.Reshape(normed, x.shape()));
  // weight and bias broadcast over [C, 1, ..., 1].
  Shape param_shape(x.rank() - 1, 1);
  param_shape[0] = channels;
  if (in.size() > 1) {
    ASSIGN_OR_RETURN(Tensor w, o.Reshape(in[1], param_shape));
    ASSIGN_OR_RETURN(y, o.Mul(y, w));
  }
  if (in.size() > 2) {
    ASSIGN_OR_RETURN(Tensor b, o.Reshape(in[2], param_shape));
    ASSIGN_OR_RETURN(y, o.Add(y, b));
  }
  return std::vector<Tensor>{y};
}

}  // namespace

void RegisterBatchGroupNormOps(OpRegistry& r) {
  OpDef bn = NewOp("batch_norm", "nn", {"input", "running_mean", "running_var", "weight", "bias"},
                   kFloat, Marking::kDifferentiable);
  bn.min_inputs = 1;
  bn.attrs = {BoolAttr("training", false), FloatAttr("momentum", 0.1), FloatAttr("eps", 1e-5)};
  bn.composite = BatchNorm;
  bn.mutates_inputs = {1, 2};
  bn.doc =
      "torch.nn.functional.batch_norm over [N, C, *]. Training normalizes with the batch "
      "statistics and updates running_mean/running_var in place (unbiased variance, "
      "running = (1 - momentum) * running + momentum * batch); evaluation uses them. Optional "
      "inputs are positional: pass a [0]-shaped tensor for an absent running statistic. "
      "momentum=None (cumulative average) is not an option: pass 1 / num_batches_tracked, as "
      "torch.nn.BatchNorm does";
  MustAdd(r, std::move(bn));

  OpDef nbn = NewInternalOp("native_batch_norm", "nn", {"input", "weight", "bias", "mean", "var"},
                            kFloat, Marking::kDifferentiable);
  nbn.min_inputs = 3;
  nbn.attrs = {BoolAttr("training", false), FloatAttr("eps", 1e-5)};
  nbn.infer = NativeBatchNormInfer;
  nbn.backward = NativeBatchNormBackward;
  MustAdd(r, std::move(nbn));

  // (grad_output, input, weight, mean, var) -> (grad_input, grad_weight, grad_bias). Training
  // differentiates through the batch statistics; evaluation treats mean and var as constants.
  OpDef nbnb = NewInternalOp("native_batch_norm_backward", "nn",
                             {"grad_output", "input", "weight", "mean", "var"}, kFloat);
  nbnb.attrs = {BoolAttr("training", false), FloatAttr("eps", 1e-5)};
  nbnb.infer = [](absl::Span<const TensorMeta> in,
                  const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    const std::string op = "native_batch_norm_backward";
    if (in[0].shape != in[1].shape || in[0].dtype != in[1].dtype || in[1].shape.size() < 2) {
      return ShapeError(op, absl::StrCat("output gradient ", ShapeToString(in[0].shape),
                                         " does not match input ", ShapeToString(in[1].shape)));
    }
    const TensorMeta stat{in[1].dtype, {in[1].shape[1]}};
    for (size_t i = 2; i < in.size(); ++i) {
      if (in[i].dtype != stat.dtype || in[i].shape != stat.shape) {
        return ShapeError(op, absl::StrCat("input ", i, " must be ", ShapeToString(stat.shape)));
      }
    }
    return std::vector<TensorMeta>{in[1], stat, stat};
  };
  MustAdd(r, std::move(nbnb));

  OpDef gn =
      NewOp("group_norm", "nn", {"input", "weight", "bias"}, kFloat, Marking::kDifferentiable);
  gn.min_inputs = 1;
  gn.attrs = {RequiredIntAttr("num_groups"), FloatAttr("eps", 1e-5)};
  gn.composite = ComputeLowPrecisionInF32(GroupNorm);
  gn.doc =
      "torch.nn.functional.group_norm over [N, C, *]: statistics per sample and group of "
      "C / num_groups channels";
  MustAdd(r, std::move(gn));
}

}  // namespace tensord
