// Sorting along a dim: sort (values and indices), argsort (indices) and topk. Orders are those
// of torch's stable sort: NaN above every number, ties kept in index order, also when
// descending. Indices are i64 (plain tensors); the values' gradient goes back to the input
// positions the indices name.
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/shape_ops.h"

namespace tensord {
namespace {
using namespace ops;

OpDef Sorting(const std::string& name, Marking marking) {
  return NewOp(name, "sorting", {"input"}, kFloatInt, marking);
}

// The values' gradient scattered to where each value came from (indices are output 1).
absl::StatusOr<std::vector<Tensor>> ValuesBackward(const GradContext& g) {
  GradOps o(g.run);
  ASSIGN_OR_RETURN(Tensor zeros, o.ZerosLike(g.inputs[0]));
  ASSIGN_OR_RETURN(Tensor gx,
                   o.Op(opname::scatter_add_internal, {zeros, g.outputs[1], g.grad_outputs[0]},
                        {{"dim", g.attrs.GetInt("dim")}}));
  return std::vector<Tensor>{gx};
}

// Size of the sorted dim (1 for a 0-d input, which sorts as one element).
absl::StatusOr<int64_t> SortedSize(const std::string& op, const Shape& in, const Attrs& a) {
  ASSIGN_OR_RETURN(int64_t dim, WrapDim(op, "dim", a.GetInt("dim"), in.size()));
  return in.empty() ? 1 : in[dim];
}

}  // namespace

void RegisterSortingOps(OpRegistry& r) {
  // stable is accepted for torch's signature; every sort here is stable, which is also a
  // valid result of an unstable sort.
  OpDef sort = Sorting("sort", Marking::kDifferentiable);
  sort.attrs = {IntAttr("dim", -1), BoolAttr("descending", false), BoolAttr("stable", false)};
  sort.infer = [](absl::Span<const TensorMeta> in,
                  const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(SortedSize("sort", in[0].shape, a).status());
    return std::vector<TensorMeta>{in[0], {DType::kI64, in[0].shape}};
  };
  sort.backward = ValuesBackward;
  sort.doc = "(values, indices i64) along dim; always stable (ties keep their order).";
  MustAdd(r, std::move(sort));

  OpDef argsort = Sorting("argsort", Marking::kNonDifferentiable);
  argsort.attrs = {IntAttr("dim", -1), BoolAttr("descending", false), BoolAttr("stable", false)};
  argsort.infer = [](absl::Span<const TensorMeta> in,
                     const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(SortedSize("argsort", in[0].shape, a).status());
    return std::vector<TensorMeta>{{DType::kI64, in[0].shape}};
  };
  argsort.doc = "The indices (i64) sort would return; always stable.";
  MustAdd(r, std::move(argsort));

  OpDef topk = Sorting("topk", Marking::kDifferentiable);
  topk.attrs = {RequiredIntAttr("k"), IntAttr("dim", -1), BoolAttr("largest", true),
                BoolAttr("sorted", true)};
  topk.infer = [](absl::Span<const TensorMeta> in,
                  const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(int64_t size, SortedSize("topk", in[0].shape, a));
    const int64_t k = a.GetInt("k");
    if (k < 0 || k > size) {
      return Error(Reason::kBadAttribute,
                   absl::StrCat("topk: attribute 'k' = ", k, " is out of range for a dim of size ",
                                size, " (expected 0..", size, ")"),
                   {{"op", "topk"}, {"attribute", "k"}, {"value", absl::StrCat(k)}});
    }
    Shape s = in[0].shape;
    if (!s.empty()) {
      ASSIGN_OR_RETURN(int64_t dim, WrapDim("topk", "dim", a.GetInt("dim"), s.size()));
      s[dim] = k;
    }
    return std::vector<TensorMeta>{{in[0].dtype, s}, {DType::kI64, s}};
  };
  topk.backward = ValuesBackward;
  topk.doc =
      "(values, indices i64) of the k largest (or smallest) along dim, in sorted order whatever "
      "`sorted` says; ties resolve like torch's stable sort (lower index first).";
  MustAdd(r, std::move(topk));
}

}  // namespace tensord
