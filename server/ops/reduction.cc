// Reductions over a list of dims (absent = all dims), with keepdim.
#include "server/ops/reduction.h"

#include "server/ops/op_helpers.h"

namespace tensord {
namespace {
using namespace ops;

}  // namespace

// Dims to reduce from the "dim" attribute (empty/absent = all), normalised and sorted.
absl::StatusOr<std::vector<int64_t>> ReductionDims(const std::string& op, const Attrs& attrs,
                                                   int64_t rank) {
  std::vector<int64_t> dims;
  if (!attrs.Has("dim") || attrs.GetInts("dim").empty()) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
    return dims;
  }
  for (int64_t d : attrs.GetInts("dim")) {
    ASSIGN_OR_RETURN(int64_t nd, NormalizeDim(d, rank));
    if (std::find(dims.begin(), dims.end(), nd) != dims.end()) {
      return AttrError(op, "dim", absl::StrCat("repeats dim ", d));
    }
    dims.push_back(nd);
  }
  std::sort(dims.begin(), dims.end());
  if (rank == 0) dims.clear();
  return dims;
}

Shape ReducedShape(const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced)
      out.push_back(in[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

void RegisterReductionOps(OpRegistry& r) {
  OpDef sum;
  sum.name = "sum";
  sum.category = "reduction";
  sum.input_names = {"input"};
  sum.attrs = {IntsAttr("dim"), BoolAttr("keepdim", false), DTypeAttr("dtype")};
  sum.dtypes = kAll;
  sum.marking = Marking::kDifferentiable;
  sum.infer = [](absl::Span<const TensorMeta> in,
                 const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(auto dims, ReductionDims("sum", a, in[0].shape.size()));
    // Like torch.sum: integer and bool inputs accumulate in i64 unless a dtype is given.
    DType out = a.GetDType("dtype").value_or(IsFloat(in[0].dtype) ? in[0].dtype : DType::kI64);
    return std::vector<TensorMeta>{{out, ReducedShape(in[0].shape, dims, a.GetBool("keepdim"))}};
  };
  sum.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    const Shape& in_shape = g.inputs[0].shape();
    ASSIGN_OR_RETURN(auto dims, ReductionDims("sum", g.attrs, in_shape.size()));
    ASSIGN_OR_RETURN(Tensor gk, o.Reshape(g.grad_outputs[0], ReducedShape(in_shape, dims, true)));
    ASSIGN_OR_RETURN(Tensor gx, o.Expand(gk, in_shape));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(sum));
}

}  // namespace tensord
