// norm: the vector p-norm over a dim list (absent = every dim), as torch.norm with a
// numeric p (torch.linalg.vector_norm): p = inf / -inf is the largest / smallest |x|, p = 0
// counts the non-zero elements. Its gradient is an internal op following PyTorch's
// norm_backward, including its choices at zero (p = 2 at a zero norm gives 0).
#include <cmath>

#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/reduction.h"

namespace tensord {
namespace {
using namespace ops;

// Dims of a norm call after checking p: a norm with a negative or infinite p has no identity,
// so (as torch) it refuses to reduce an empty dimension.
absl::StatusOr<std::vector<int64_t>> NormDims(const std::string& op, const Shape& shape,
                                              const Attrs& a) {
  const double p = a.GetFloat("p");
  if (std::isnan(p)) return AttrError(op, "p", "is NaN; expected a number, inf or -inf");
  ASSIGN_OR_RETURN(auto dims, ReductionDims(op, a, shape.size()));
  if (p < 0 || p == INFINITY) {
    for (int64_t d : dims) {
      if (shape[d] != 0) continue;
      return Error(Reason::kShapeMismatch,
                   absl::StrCat(op, ": cannot compute the ", p, " norm over the empty dimension ",
                                d, " of shape ", ShapeToString(shape),
                                " (it has no identity); reduce non-empty dims or use p >= 0"),
                   {{"op", op},
                    {"shape", ShapeToString(shape)},
                    {"dim", absl::StrCat(d)},
                    {"attribute", "p"},
                    {"value", absl::StrCat(p)}});
    }
  }
  return dims;
}

OpDef Norm() {
  OpDef d = NewOp("norm", "reduction", {"input"}, kFloat, Marking::kDifferentiable);
  d.attrs = {FloatAttr("p", 2.0), IntsAttr("dim"), BoolAttr("keepdim", false)};
  d.doc =
      "vector p-norm over dim (absent: every element): (sum |x|^p)^(1/p); p = inf / -inf: "
      "max / min |x|; p = 0: number of non-zero elements. p is a number (2 for 'fro')";
  d.infer = [](absl::Span<const TensorMeta> in,
               const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(auto dims, NormDims("norm", in[0].shape, a));
    return std::vector<TensorMeta>{
        {in[0].dtype, ReducedShape(in[0].shape, dims, a.GetBool("keepdim"))}};
  };
  d.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(
        Tensor gx,
        o.Op(opname::norm_backward, {g.grad_outputs[0], g.inputs[0], g.outputs[0]}, g.attrs.map()));
    return std::vector<Tensor>{gx};
  };
  return d;
}

// Internal: (grad, input, result) -> grad of input.
OpDef NormBackward() {
  OpDef d = NewInternalOp("norm_backward", "reduction", {"grad", "input", "result"}, kFloat);
  d.attrs = {FloatAttr("p", 2.0), IntsAttr("dim"), BoolAttr("keepdim", false)};
  d.infer = [](absl::Span<const TensorMeta> in,
               const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    if (in[0].dtype != in[1].dtype || in[2].dtype != in[1].dtype) {
      return DtypeError("norm_backward", "grad, input and result must share one dtype");
    }
    RETURN_IF_ERROR(ReductionDims("norm_backward", a, in[1].shape.size()).status());
    return std::vector<TensorMeta>{{in[0].dtype, in[1].shape}};
  };
  return d;
}

}  // namespace

void RegisterNormOps(OpRegistry& r) {
  MustAdd(r, Norm());
  MustAdd(r, NormBackward());
}

}  // namespace tensord
