// Reductions over a list of dims (absent = all dims), with keepdim: sum, mean, all, any.
// max/min/arg* live in reduction_minmax.cc, var/std/logsumexp in reduction_stats.cc.
#include "server/ops/reduction.h"

#include <algorithm>

#include "server/ops/op_helpers.h"

namespace tensord {
namespace {
using namespace ops;

OpDef ListReduction(const std::string& name, DTypeSet dtypes, Marking marking) {
  OpDef d = NewOp(name, "reduction", {"input"}, dtypes, marking);
  d.attrs = {IntsAttr("dim"), BoolAttr("keepdim", false)};
  return d;
}

// Gradient of a reduction whose every input element contributes with weight `scale`:
// the output gradient broadcast back over the reduced dims.
absl::StatusOr<Tensor> BroadcastBack(const GradContext& g, const std::string& op, double scale) {
  GradOps o(g.run);
  const Shape& in_shape = g.inputs[0].shape();
  ASSIGN_OR_RETURN(auto dims, ReductionDims(op, g.attrs, in_shape.size()));
  ASSIGN_OR_RETURN(Tensor gk, o.Reshape(g.grad_outputs[0], ReducedShape(in_shape, dims, true)));
  ASSIGN_OR_RETURN(Tensor gx, o.Expand(gk, in_shape));
  if (scale != 1.0) {
    ASSIGN_OR_RETURN(gx, o.Scale(gx, scale));
  }
  return gx;
}

}  // namespace

absl::StatusOr<int64_t> NormalizeDimFor(const std::string& op, int64_t dim, int64_t rank,
                                        const char* attr) {
  const int64_t r = rank == 0 ? 1 : rank;
  if (dim < -r || dim >= r) {
    return Error(Reason::kBadAttribute,
                 absl::StrCat(op, ": attribute '", attr, "' = ", dim,
                              " is out of range for a tensor of rank ", rank, " (expected ", -r,
                              "..", r - 1, ")"),
                 {{"op", op},
                  {"attribute", attr},
                  {"value", absl::StrCat(dim)},
                  {"rank", absl::StrCat(rank)}});
  }
  return dim < 0 ? dim + r : dim;
}

absl::StatusOr<std::vector<int64_t>> ReductionDims(const std::string& op, const Attrs& attrs,
                                                   int64_t rank) {
  std::vector<int64_t> dims;
  if (!attrs.Has("dim") || attrs.GetInts("dim").empty()) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
    return dims;
  }
  for (int64_t d : attrs.GetInts("dim")) {
    ASSIGN_OR_RETURN(int64_t nd, NormalizeDimFor(op, d, rank));
    if (std::find(dims.begin(), dims.end(), nd) != dims.end()) {
      return AttrError(op, "dim", absl::StrCat("repeats dim ", d));
    }
    dims.push_back(nd);
  }
  std::sort(dims.begin(), dims.end());
  if (rank == 0) dims.clear();
  return dims;
}

absl::StatusOr<std::vector<int64_t>> SingleDimOrAll(const std::string& op, const Attrs& attrs,
                                                    int64_t rank) {
  std::vector<int64_t> dims;
  if (attrs.Has("dim")) {
    ASSIGN_OR_RETURN(int64_t d, NormalizeDimFor(op, attrs.GetInt("dim"), rank));
    if (rank > 0) dims.push_back(d);
  } else {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  }
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

int64_t ReducedCount(const Shape& in, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= in[d];
  return n;
}

absl::Status CheckNonEmptyReduction(const std::string& op, const Shape& in,
                                    const std::vector<int64_t>& dims) {
  for (int64_t d : dims) {
    if (in[d] == 0) {
      return Error(Reason::kShapeMismatch,
                   absl::StrCat(op, ": cannot reduce over an empty dimension (dim ", d,
                                " of shape ", ShapeToString(in),
                                "); the operation has no identity, specify a non-empty dim"),
                   {{"op", op}, {"shape", ShapeToString(in)}, {"dim", absl::StrCat(d)}});
    }
  }
  // A 0-d input is one element; a reduction over all dims of an empty tensor is covered above.
  return absl::OkStatus();
}

void RegisterReductionOps(OpRegistry& r) {
  OpDef sum = ListReduction("sum", kAll, Marking::kDifferentiable);
  sum.attrs.push_back(DTypeAttr("dtype"));
  sum.infer = [](absl::Span<const TensorMeta> in,
                 const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(auto dims, ReductionDims("sum", a, in[0].shape.size()));
    // Like torch.sum: integer and bool inputs accumulate in i64 unless a dtype is given.
    DType out = a.GetDType("dtype").value_or(IsFloat(in[0].dtype) ? in[0].dtype : DType::kI64);
    return std::vector<TensorMeta>{{out, ReducedShape(in[0].shape, dims, a.GetBool("keepdim"))}};
  };
  sum.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    ASSIGN_OR_RETURN(Tensor gx, BroadcastBack(g, "sum", 1.0));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(sum));

  OpDef mean = ListReduction("mean", kFloatInt, Marking::kDifferentiable);
  mean.attrs.push_back(DTypeAttr("dtype"));
  mean.infer = [](absl::Span<const TensorMeta> in,
                  const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(auto dims, ReductionDims("mean", a, in[0].shape.size()));
    std::optional<DType> want = a.GetDType("dtype");
    if (want && !IsFloat(*want)) {
      return DtypeError("mean", absl::StrCat("the dtype attribute must be a floating point dtype, "
                                             "got ",
                                             DTypeName(*want)));
    }
    if (!want && !IsFloat(in[0].dtype)) {
      return DtypeError("mean", absl::StrCat("input dtype ", DTypeName(in[0].dtype),
                                             " is not floating point; cast it or pass "
                                             "dtype=f32 or dtype=f64"));
    }
    return std::vector<TensorMeta>{
        {want.value_or(in[0].dtype), ReducedShape(in[0].shape, dims, a.GetBool("keepdim"))}};
  };
  mean.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    const Shape& shape = g.inputs[0].shape();
    ASSIGN_OR_RETURN(auto dims, ReductionDims("mean", g.attrs, shape.size()));
    const int64_t count = ReducedCount(shape, dims);
    ASSIGN_OR_RETURN(Tensor gx, BroadcastBack(g, "mean", 1.0 / static_cast<double>(count)));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(mean));

  // torch.all/any accept every dtype (nonzero = true) and return bool, except for u8, where
  // they return u8 (0 or 1).
  for (const char* name : {"all", "any"}) {
    OpDef d = ListReduction(name, kAll, Marking::kNonDifferentiable);
    std::string op = name;
    d.infer = [op](absl::Span<const TensorMeta> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
      ASSIGN_OR_RETURN(auto dims, ReductionDims(op, a, in[0].shape.size()));
      return std::vector<TensorMeta>{{in[0].dtype == DType::kU8 ? DType::kU8 : DType::kBool,
                                      ReducedShape(in[0].shape, dims, a.GetBool("keepdim"))}};
    };
    MustAdd(r, std::move(d));
  }

  RegisterMinMaxOps(r);
  RegisterStatisticOps(r);
  RegisterProductScanOps(r);
  RegisterNormOps(r);
}

}  // namespace tensord
