// Selecting reductions: max, min (values, or values and indices along one dim), amax, amin
// (over a dim list) and argmax, argmin. NaN wins every comparison, as in PyTorch.
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/reduction.h"

namespace tensord {
namespace {
using namespace ops;

// Output shape of a reduction over an optional single "dim" (absent: every dim).
absl::StatusOr<std::pair<std::vector<int64_t>, Shape>> SingleDimReduction(const std::string& op,
                                                                          const TensorMeta& in,
                                                                          const Attrs& a) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, SingleDimOrAll(op, a, in.shape.size()));
  RETURN_IF_ERROR(CheckNonEmptyReduction(op, in.shape, dims));
  return std::make_pair(dims, ReducedShape(in.shape, dims, a.GetBool("keepdim")));
}

// max/min: without dim one 0-d value (gradient shared evenly by the tied maxima, like
// torch.max(x)); with dim the values and their first index (gradient to that index).
OpDef MaxMin(const std::string& name) {
  OpDef d = NewOp(name, "reduction", {"input"}, kFloatInt, Marking::kDifferentiable);
  d.attrs = {OptionalIntAttr("dim"), BoolAttr("keepdim", false)};
  d.doc = "without dim: the " + name + " value (0-d); with dim: (values, indices i64)";
  d.infer = [name](absl::Span<const TensorMeta> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    if (!a.Has("dim")) {
      if (a.GetBool("keepdim")) {
        return AttrError(name, "keepdim", "needs a dim (the full reduction returns a 0-d value)");
      }
      RETURN_IF_ERROR(SingleDimReduction(name, in[0], a).status());  // refuses an empty input
      return std::vector<TensorMeta>{{in[0].dtype, {}}};
    }
    ASSIGN_OR_RETURN(auto reduced, SingleDimReduction(name, in[0], a));
    return std::vector<TensorMeta>{{in[0].dtype, reduced.second}, {DType::kI64, reduced.second}};
  };
  d.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    Tensor gx;
    if (g.attrs.Has("dim")) {
      ASSIGN_OR_RETURN(
          gx, o.Op(opname::max_dim_backward, {g.grad_outputs[0], g.outputs[1], g.inputs[0]},
                   {{"dim", g.attrs.GetInt("dim")}, {"keepdim", g.attrs.GetBool("keepdim")}}));
    } else {
      ASSIGN_OR_RETURN(gx,
                       o.Op(opname::amax_backward, {g.grad_outputs[0], g.inputs[0], g.outputs[0]},
                            {{"match_nan", true}}));
    }
    return std::vector<Tensor>{gx};
  };
  return d;
}

// amax/amin over a dim list; the gradient is split evenly among tied extrema.
OpDef AMaxMin(const std::string& name) {
  OpDef d = NewOp(name, "reduction", {"input"}, kFloatInt, Marking::kDifferentiable);
  d.attrs = {IntsAttr("dim"), BoolAttr("keepdim", false)};
  d.infer = [name](absl::Span<const TensorMeta> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(auto dims, ReductionDims(name, a, in[0].shape.size()));
    RETURN_IF_ERROR(CheckNonEmptyReduction(name, in[0].shape, dims));
    return std::vector<TensorMeta>{
        {in[0].dtype, ReducedShape(in[0].shape, dims, a.GetBool("keepdim"))}};
  };
  d.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    AttrMap attrs = g.attrs.map();
    attrs["match_nan"] = false;
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::amax_backward,
                                     {g.grad_outputs[0], g.inputs[0], g.outputs[0]}, attrs));
    return std::vector<Tensor>{gx};
  };
  return d;
}

OpDef ArgMaxMin(const std::string& name) {
  OpDef d = NewOp(name, "reduction", {"input"}, kFloatInt, Marking::kNonDifferentiable);
  d.attrs = {OptionalIntAttr("dim"), BoolAttr("keepdim", false)};
  d.doc = "index (i64) of the first extremum; without dim, into the flattened input";
  d.infer = [name](absl::Span<const TensorMeta> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(auto reduced, SingleDimReduction(name, in[0], a));
    return std::vector<TensorMeta>{{DType::kI64, reduced.second}};
  };
  return d;
}

// Internal: gradient of amax/amin/max/min over dims, split evenly among the elements equal
// to the result. match_nan: a NaN result selects the NaN elements (torch.max(x)); otherwise
// NaN selects nothing (torch.amax).
OpDef AMaxBackward() {
  OpDef d = NewInternalOp("amax_backward", "reduction", {"grad", "input", "result"}, kFloat);
  d.attrs = {IntsAttr("dim"), BoolAttr("keepdim", false), BoolAttr("match_nan", false)};
  d.infer = [](absl::Span<const TensorMeta> in,
               const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    if (in[0].dtype != in[1].dtype || in[2].dtype != in[1].dtype) {
      return DtypeError("amax_backward", "grad, input and result must share one dtype");
    }
    return std::vector<TensorMeta>{{in[0].dtype, in[1].shape}};
  };
  return d;
}

// Internal: scatters the gradient of max/min values along `dim` to the selected indices.
OpDef MaxDimBackward() {
  OpDef d = NewInternalOp("max_dim_backward", "reduction", {"grad", "indices", "input"}, kFloat);
  d.attrs = {RequiredIntAttr("dim"), BoolAttr("keepdim", false)};
  d.infer = [](absl::Span<const TensorMeta> in,
               const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(
        NormalizeDimFor("max_dim_backward", a.GetInt("dim"), in[2].shape.size()).status());
    if (in[0].dtype != in[2].dtype || in[1].dtype != DType::kI64) {
      return DtypeError("max_dim_backward", "expects grad and input of one dtype, i64 indices");
    }
    return std::vector<TensorMeta>{{in[0].dtype, in[2].shape}};
  };
  return d;
}

}  // namespace

void RegisterMinMaxOps(OpRegistry& r) {
  MustAdd(r, MaxMin("max"));
  MustAdd(r, MaxMin("min"));
  MustAdd(r, AMaxMin("amax"));
  MustAdd(r, AMaxMin("amin"));
  MustAdd(r, ArgMaxMin("argmax"));
  MustAdd(r, ArgMaxMin("argmin"));
  MustAdd(r, AMaxBackward());
  MustAdd(r, MaxDimBackward());
}

}  // namespace tensord
