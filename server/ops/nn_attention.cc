// scaled_dot_product_attention (torch.nn.functional semantics, PyTorch's reference math):
// softmax(query @ key^T * scale + bias) @ value, where the bias is -inf outside a causal
// (top-left aligned lower-triangular) mask or where a boolean attn_mask is false, and a float
// attn_mask is added. A composite over matmul, mul, where/add and softmax, so it differentiates
// through its constituents; a row masked everywhere is NaN, as in PyTorch's reference.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {
using namespace ops;

// bf16/f16 inputs are computed in f32 and the result rounded once, as the dispatcher does for
// kernels: rounding each constituent's output would compound the error. Unlike
// ops::ComputeLowPrecisionInF32 (linalg_products.h) this widens with a bool attn_mask present.
absl::StatusOr<std::vector<Tensor>> InF32(OpRunner& run, absl::Span<const Tensor> in,
                                          const Attrs& a, const CompositeFn& body) {
  if (!IsLowPrecision(in[0].dtype())) return body(run, in, a);
  const DType stored = in[0].dtype();
  std::vector<Tensor> wide(in.begin(), in.end());
  for (Tensor& t : wide) {
    if (!IsLowPrecision(t.dtype())) continue;
    ASSIGN_OR_RETURN(t, run.Run1(opname::to_dtype, {t}, {{"dtype", std::string("f32")}}));
  }
  ASSIGN_OR_RETURN(std::vector<Tensor> outs, body(run, wide, a));
  for (Tensor& t : outs) {
    ASSIGN_OR_RETURN(t,
                     run.Run1(opname::to_dtype, {t}, {{"dtype", std::string(DTypeName(stored))}}));
  }
  return outs;
}

absl::Status CheckAttentionInputs(const std::string& op, absl::Span<const Tensor> in) {
  static const char* kNames[] = {"query", "key", "value", "attn_mask"};
  for (size_t i = 0; i < 3; ++i) {
    if (in[i].rank() < 2) {
      return ShapeError(op, absl::StrCat(kNames[i], " must be [..., L, E] with rank >= 2, got ",
                                         ShapeToString(in[i].shape())));
    }
    if (in[i].dtype() != in[0].dtype()) {
      return DtypeError(op, absl::StrCat(kNames[i], " is ", DTypeName(in[i].dtype()),
                                         " but query is ", DTypeName(in[0].dtype())));
    }
  }
  const Tensor& q = in[0];
  const Tensor& k = in[1];
  const Tensor& v = in[2];
  if (k.dim(k.rank() - 1) != q.dim(q.rank() - 1)) {
    return ShapeError(op, absl::StrCat("query ", ShapeToString(q.shape()), " and key ",
                                       ShapeToString(k.shape()), " differ in the embedding dim"));
  }
  if (k.dim(k.rank() - 2) != v.dim(v.rank() - 2)) {
    return ShapeError(op, absl::StrCat("key ", ShapeToString(k.shape()), " and value ",
                                       ShapeToString(v.shape()), " differ in sequence length"));
  }
  if (in.size() > 3 && in[3].dtype() != DType::kBool && in[3].dtype() != q.dtype()) {
    return DtypeError(op, absl::StrCat("attn_mask must be bool or ", DTypeName(q.dtype()),
                                       " like query, got ", DTypeName(in[3].dtype())));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> Attention(OpRunner& run, absl::Span<const Tensor> in,
                                              const Attrs& a) {
  const std::string op = "scaled_dot_product_attention";
  RETURN_IF_ERROR(CheckAttentionInputs(op, in));
  const double dropout_p = a.GetFloat("dropout_p");
  if (dropout_p != 0.0) {
    return Error(Reason::kBadAttribute,
                 absl::StrCat(op,
                              ": attribute 'dropout_p' must be 0 (attention dropout is not "
                              "supported; apply dropout to the output instead), got ",
                              dropout_p),
                 {{"op", op}, {"attribute", "dropout_p"}, {"value", absl::StrCat(dropout_p)}});
  }
  const bool causal = a.GetBool("is_causal");
  if (causal && in.size() > 3) {
    return Error(Reason::kBadOperand,
                 absl::StrCat(op, ": attn_mask must not be given when is_causal is true"),
                 {{"op", op}, {"attribute", "is_causal"}});
  }
  const Tensor& q = in[0];
  const int64_t embed = q.dim(q.rank() - 1);
  const double scale = a.Has("scale") ? a.GetFloat("scale") : 1.0 / std::sqrt(double(embed));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  GradOps o(run);
  ASSIGN_OR_RETURN(Tensor key_t, o.Op(opname::transpose, {in[1]},
                                      {{"dim0", int64_t{-2}}, {"dim1", int64_t{-1}}}));
  ASSIGN_OR_RETURN(Tensor scores, o.Op(opname::matmul, {q, key_t}));
  ASSIGN_OR_RETURN(scores, o.Scale(scores, scale));
  if (causal) {
    const int64_t l = q.dim(q.rank() - 2), s = in[1].dim(in[1].rank() - 2);
    ASSIGN_OR_RETURN(Tensor ones, o.Op(opname::ones, {},
                                       {{"shape", Shape{l, s}}, {"dtype", std::string("bool")}}));
    ASSIGN_OR_RETURN(Tensor keep, o.Op(opname::tril, {ones}, {{"diagonal", int64_t{0}}}));
    ASSIGN_OR_RETURN(scores, o.Op(opname::where, {keep, scores, GradOps::Scalar(neg_inf)}));
  } else if (in.size() > 3 && in[3].dtype() == DType::kBool) {
    ASSIGN_OR_RETURN(scores, o.Op(opname::where, {in[3], scores, GradOps::Scalar(neg_inf)}));
  } else if (in.size() > 3) {
    ASSIGN_OR_RETURN(scores, o.Add(scores, in[3]));
  }
  ASSIGN_OR_RETURN(Tensor weights, o.Op(opname::softmax, {scores}, {{"dim", int64_t{-1}}}));
  ASSIGN_OR_RETURN(Tensor out, o.Op(opname::matmul, {weights, in[2]}));
  return std::vector<Tensor>{out};
}

}  // namespace

void RegisterAttentionOps(OpRegistry& r) {
  OpDef d = NewOp("scaled_dot_product_attention", "nn", {"query", "key", "value", "attn_mask"},
                  kFloat, Marking::kDifferentiable);
  d.min_inputs = 3;
  d.attrs = {FloatAttr("dropout_p", 0.0), BoolAttr("is_causal", false), OptionalFloatAttr("scale")};
  d.composite = [](OpRunner& run, absl::Span<const Tensor> in, const Attrs& a) {
    return InF32(run, in, a, Attention);
  };
  d.doc =
      "torch.nn.functional.scaled_dot_product_attention over [..., L, E] query, [..., S, E] "
      "key, [..., S, Ev] value; scale defaults to 1/sqrt(E); a bool attn_mask keeps where "
      "true, a float one is added; dropout_p must be 0";
  MustAdd(r, std::move(d));
}

}  // namespace tensord
