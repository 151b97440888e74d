// layer_norm, embedding and dropout (torch.nn.functional semantics).
//
// Dropout and checkpointing: BALANCED recomputes memory-bound ops by re-running their forward,
// so the mask must be a pure function of what the tape records. dropout is therefore a
// composite that fixes a seed (the caller's, or one drawn at call time) and calls the internal
// op native_dropout, whose mask is a counter-based hash of (seed, element index): the recorded
// node carries the seed in its attributes, a recomputed forward draws the same mask, and the
// backward (the same masking applied to the gradient) needs no saved mask at all.
#include <mutex>
#include <random>

#include "absl/strings/str_cat.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {
using namespace ops;

// ---- layer_norm -------------------------------------------------------------------------------

absl::StatusOr<std::vector<TensorMeta>> LayerNormInfer(absl::Span<const TensorMeta> in,
                                                       const Attrs& a) {
  const std::string op = "layer_norm";
  const Shape norm = a.GetInts("normalized_shape");
  const Shape& x = in[0].shape;
  bool fits = norm.size() <= x.size();
  for (size_t i = 0; fits && i < norm.size(); ++i) {
    fits = x[x.size() - norm.size() + i] == norm[i];
  }
  if (!fits) {
    return ShapeError(
        op, absl::StrCat("normalized_shape ", ShapeToString(norm),
                         " does not match the trailing dims of input ", ShapeToString(x)));
  }
  for (size_t i = 1; i < in.size(); ++i) {
    const char* what = i == 1 ? "weight" : "bias";
    if (in[i].dtype != in[0].dtype) {
      return DtypeError(op, absl::StrCat(what, " is ", DTypeName(in[i].dtype), " but input is ",
                                         DTypeName(in[0].dtype)));
    }
    if (in[i].shape != norm) {
      return ShapeError(op, absl::StrCat(what, " has shape ", ShapeToString(in[i].shape),
                                         " but normalized_shape is ", ShapeToString(norm)));
    }
  }
  if (a.GetFloat("eps") < 0) {
    return AttrError(op, "eps", absl::StrCat("must be non-negative, got ", a.GetFloat("eps")));
  }
  return std::vector<TensorMeta>{in[0]};
}

absl::StatusOr<std::vector<Tensor>> LayerNormBackward(const GradContext& g) {
  std::vector<Tensor> args = {g.grad_outputs[0], g.inputs[0]};
  if (g.inputs.size() > 1) args.push_back(g.inputs[1]);
  ASSIGN_OR_RETURN(std::vector<Tensor> parts,
                   g.run.Run(opname::layer_norm_backward, std::move(args), g.attrs.map()));
  std::vector<Tensor> grads(g.inputs.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    if (g.needs_input_grad[i]) grads[i] = parts[i];
  }
  return grads;
}

// ---- embedding --------------------------------------------------------------------------------

// padding_idx normalised into [0, num_weights), or -1 when absent.
absl::StatusOr<int64_t> PaddingIdx(const std::string& op, const Attrs& a, int64_t num_weights) {
  if (!a.Has("padding_idx")) return -1;
  int64_t p = a.GetInt("padding_idx");
  if (p >= num_weights || p < -num_weights) {
    return AttrError(op, "padding_idx",
                     absl::StrCat("must be within [", -num_weights, ", ", num_weights, ") for ",
                                  num_weights, " embeddings, got ", p));
  }
  return p < 0 ? p + num_weights : p;
}

absl::StatusOr<std::vector<TensorMeta>> EmbeddingInfer(absl::Span<const TensorMeta> in,
                                                       const Attrs& a) {
  const std::string op = "embedding";
  const TensorMeta& w = in[1];
  if (!IsFloat(w.dtype)) {
    return DtypeError(op, absl::StrCat("weight must be f32 or f64, got ", DTypeName(w.dtype)));
  }
  if (w.shape.size() != 2) {
    return ShapeError(op, absl::StrCat("weight must be 2-d [num_embeddings, embedding_dim], got ",
                                       ShapeToString(w.shape)));
  }
  RETURN_IF_ERROR(PaddingIdx(op, a, w.shape[0]).status());
  Shape out = in[0].shape;
  out.push_back(w.shape[1]);
  return std::vector<TensorMeta>{{w.dtype, out}};
}

// ---- dropout ----------------------------------------------------------------------------------

int64_t DrawSeed() {
  static std::mutex mu;
  static std::mt19937_64 gen{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  return static_cast<int64_t>(gen() >> 1);
}

absl::Status CheckP(const std::string& op, double p) {
  if (!(p >= 0.0 && p <= 1.0)) {
    return Error(Reason::kBadAttribute,
                 absl::StrCat(op,
                              ": attribute 'p' (dropout probability) must be within [0, 1], "
                              "got ",
                              p),
                 {{"op", op}, {"attribute", "p"}, {"value", absl::StrCat(p)}});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> DropoutComposite(OpRunner& run, absl::Span<const Tensor> in,
                                                     const Attrs& a) {
  const double p = a.GetFloat("p");
  RETURN_IF_ERROR(CheckP("dropout", p));
  // Outside training dropout is the identity; p = 0 gives it its own output and gradient.
  const double effective_p = a.GetBool("training") ? p : 0.0;
  const int64_t seed = a.Has("seed") ? a.GetInt("seed") : DrawSeed();
  return run.Run(opname::native_dropout, {in[0]}, {{"p", effective_p}, {"seed", seed}});
}

}  // namespace

void RegisterLayerNormEmbeddingDropoutOps(OpRegistry& r) {
  OpDef ln =
      NewOp("layer_norm", "nn", {"input", "weight", "bias"}, kFloat, Marking::kDifferentiable);
  ln.min_inputs = 1;
  ln.attrs = {RequiredIntsAttr("normalized_shape"), FloatAttr("eps", 1e-5)};
  ln.infer = LayerNormInfer;
  ln.backward = LayerNormBackward;
  ln.doc = "torch.nn.functional.layer_norm over the trailing normalized_shape dims";
  MustAdd(r, std::move(ln));

  // (grad_output, input, weight?) -> (grad_input, grad_weight, grad_bias); the statistics are
  // recomputed from the input rather than saved.
  OpDef lnb =
      NewInternalOp("layer_norm_backward", "nn", {"grad_output", "input", "weight"}, kFloat);
  lnb.min_inputs = 2;
  lnb.attrs = {RequiredIntsAttr("normalized_shape"), FloatAttr("eps", 1e-5)};
  lnb.infer = [](absl::Span<const TensorMeta> in,
                 const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(std::vector<TensorMeta> fwd, LayerNormInfer(in.subspan(1), a));
    if (in[0].shape != in[1].shape || in[0].dtype != in[1].dtype) {
      return ShapeError("layer_norm_backward",
                        absl::StrCat("output gradient ", ShapeToString(in[0].shape),
                                     " does not match input ", ShapeToString(in[1].shape)));
    }
    const TensorMeta params{in[1].dtype, a.GetInts("normalized_shape")};
    return std::vector<TensorMeta>{in[1], params, params};
  };
  MustAdd(r, std::move(lnb));

  // The primary operand is the index tensor; weight's float dtype is checked by the shape rule.
  OpDef emb = NewOp("embedding", "nn", {"input", "weight"}, kInt, Marking::kDifferentiable);
  emb.attrs = {OptionalIntAttr("padding_idx")};
  // Indices are i32 or i64, as in PyTorch: no u8/i8/i16 index tensors.
  emb.widen_storage_dtypes = false;
  emb.infer = EmbeddingInfer;
  emb.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    AttrMap attrs = g.attrs.map();
    attrs["num_weights"] = g.inputs[1].dim(0);
    ASSIGN_OR_RETURN(Tensor gw,
                     o.Op(opname::embedding_backward, {g.grad_outputs[0], g.inputs[0]}, attrs));
    return std::vector<Tensor>{Tensor(), gw};
  };
  emb.doc = "torch.nn.functional.embedding(input=indices, weight): rows of weight";
  MustAdd(r, std::move(emb));

  OpDef embb = NewInternalOp("embedding_backward", "nn", {"grad_output", "indices"}, kFloat);
  embb.attrs = {OptionalIntAttr("padding_idx"), RequiredIntAttr("num_weights")};
  embb.infer = [](absl::Span<const TensorMeta> in,
                  const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    const std::string op = "embedding_backward";
    Shape expect = in[1].shape;
    if (in[0].shape.empty() || !IsIndexInt(in[1].dtype)) {
      return ShapeError(op, "expects a gradient [..., D] and integer indices");
    }
    expect.push_back(in[0].shape.back());
    if (expect != in[0].shape) {
      return ShapeError(op, absl::StrCat("gradient ", ShapeToString(in[0].shape),
                                         " does not match indices ", ShapeToString(in[1].shape)));
    }
    const int64_t v = a.GetInt("num_weights");
    RETURN_IF_ERROR(PaddingIdx(op, a, v).status());
    return std::vector<TensorMeta>{{in[0].dtype, {v, in[0].shape.back()}}};
  };
  MustAdd(r, std::move(embb));

  OpDef dropout = NewOp("dropout", "nn", {"input"}, kFloat, Marking::kDifferentiable);
  dropout.attrs = {FloatAttr("p", 0.5), BoolAttr("training", true), OptionalIntAttr("seed")};
  dropout.composite = DropoutComposite;
  dropout.doc =
      "torch.nn.functional.dropout; the mask is a function of seed (drawn per call when "
      "absent), so a seed makes it reproducible";
  MustAdd(r, std::move(dropout));

  OpDef nd = NewInternalOp("native_dropout", "nn", {"input"}, kFloat, Marking::kDifferentiable);
  nd.attrs = {RequiredFloatAttr("p"), RequiredIntAttr("seed")};
  nd.infer = [](absl::Span<const TensorMeta> in,
                const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(CheckP("native_dropout", a.GetFloat("p")));
    return std::vector<TensorMeta>{in[0]};
  };
  // The output is input * mask / (1 - p) elementwise, so the gradient is the same masking.
  nd.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::native_dropout, {g.grad_outputs[0]}, g.attrs.map()));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(nd));
}

}  // namespace tensord
