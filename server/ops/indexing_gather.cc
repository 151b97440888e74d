// Indexing by tensors: index_select and gather (index values are checked by the kernel, which
// never reads out of bounds), masked_fill, one_hot, and the two scatter-add internal ops their
// gradients are written with (the client-facing scatter ops are in indexing_scatter_select.cc).
#include <cmath>
#include <limits>

#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/shape_ops.h"

namespace tensord {
namespace {
using namespace ops;

absl::Status ShapeMismatch(const std::string& op, const std::string& what, const Shape& shape) {
  return Error(Reason::kShapeMismatch, absl::StrCat(op, ": ", what),
               {{"op", op}, {"shape", ShapeToString(shape)}});
}

OpDef Indexing(const std::string& name, std::vector<std::string> inputs, DTypeSet dtypes) {
  OpDef d;
  d.name = name;
  d.category = "indexing";
  d.min_inputs = d.max_inputs = static_cast<int>(inputs.size());
  d.input_names = std::move(inputs);
  d.dtypes = dtypes;
  d.marking = Marking::kDifferentiable;
  return d;
}

absl::StatusOr<std::vector<TensorMeta>> IndexSelectInfer(absl::Span<const TensorMeta> in,
                                                         const Attrs& a) {
  const Shape& x = in[0].shape;
  const Shape& index = in[1].shape;
  RETURN_IF_ERROR(CheckIndexDtype("index_select", in[1]));
  if (index.size() > 1) {
    return ShapeMismatch("index_select",
                         absl::StrCat("index must be 0-d or 1-d, got shape ", ShapeToString(index)),
                         index);
  }
  ASSIGN_OR_RETURN(int64_t dim, WrapDim("index_select", "dim", a.GetInt("dim"), x.size()));
  Shape out = x;
  if (x.empty()) {
    // A 0-d input is indexed as one element and stays 0-d, as in torch.
    if (NumElements(index) != 1) {
      return ShapeMismatch(
          "index_select",
          absl::StrCat("a 0-d input takes exactly one index, got ", NumElements(index)), index);
    }
  } else {
    out[dim] = NumElements(index);
  }
  return std::vector<TensorMeta>{{in[0].dtype, out}};
}

absl::StatusOr<std::vector<TensorMeta>> GatherInfer(absl::Span<const TensorMeta> in,
                                                    const Attrs& a) {
  const Shape& x = in[0].shape;
  const Shape& index = in[1].shape;
  RETURN_IF_ERROR(CheckIndexDtype("gather", in[1]));
  ASSIGN_OR_RETURN(int64_t dim, WrapDim("gather", "dim", a.GetInt("dim"), x.size()));
  // torch treats 0-d and 1-d alike here: both have one (possibly implicit) dim.
  const size_t rank = std::max<size_t>(x.size(), 1);
  if (std::max<size_t>(index.size(), 1) != rank) {
    return ShapeMismatch("gather",
                         absl::StrCat("index ", ShapeToString(index), " and input ",
                                      ShapeToString(x), " must have the same number of dims"),
                         index);
  }
  for (size_t d = 0; d < rank && NumElements(index) > 0; ++d) {
    const int64_t xs = x.empty() ? 1 : x[d], is = index.empty() ? 1 : index[d];
    if (static_cast<int64_t>(d) != dim && is > xs) {
      return ShapeMismatch("gather",
                           absl::StrCat("index ", ShapeToString(index), " is larger than input ",
                                        ShapeToString(x), " in dim ", d, " (not the gather dim)"),
                           index);
    }
  }
  return std::vector<TensorMeta>{{in[0].dtype, index}};
}

// index_add_internal / scatter_add_internal: output = self with source added at the indices.
InferFn ScatterAddInfer(const std::string& op, bool gather_layout) {
  return [op, gather_layout](absl::Span<const TensorMeta> in,
                             const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(CheckIndexDtype(op, in[1]));
    ASSIGN_OR_RETURN(int64_t dim, WrapDim(op, "dim", a.GetInt("dim"), in[0].shape.size()));
    Shape want = in[1].shape;
    if (!gather_layout) {
      want = in[0].shape;
      if (!want.empty()) want[dim] = NumElements(in[1].shape);
    }
    if (in[2].shape != want || in[2].dtype != in[0].dtype) {
      return ShapeMismatch(
          op,
          absl::StrCat("source ", ShapeToString(in[2].shape), " of ", DTypeName(in[2].dtype),
                       " does not fit ", ShapeToString(want), " of ", DTypeName(in[0].dtype)),
          in[2].shape);
    }
    return std::vector<TensorMeta>{in[0]};
  };
}

// Gradient w.r.t. input of index_select (gather): the gradient added back at the indices.
BackwardFn SelectBackward(const std::string& add_op) {
  return [add_op](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor zeros, o.ZerosLike(g.inputs[0]));
    ASSIGN_OR_RETURN(Tensor gx, o.Op(add_op, {zeros, g.inputs[1], g.grad_outputs[0]},
                                     {{"dim", g.attrs.GetInt("dim")}}));
    return std::vector<Tensor>{gx, Tensor()};
  };
}

// Gradients of the scatter-adds: self passes through, source reads back at the indices.
BackwardFn ScatterAddBackward(const std::string& select_op) {
  return [select_op](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    std::vector<Tensor> grads(3);
    grads[0] = g.grad_outputs[0];
    if (g.needs_input_grad[2]) {
      GradOps o(g.run);
      ASSIGN_OR_RETURN(grads[2], o.Op(select_op, {g.grad_outputs[0], g.inputs[1]},
                                      {{"dim", g.attrs.GetInt("dim")}}));
    }
    return grads;
  };
}

// The fill value must be representable in the input's dtype (an int tensor cannot hold inf).
absl::Status CheckFillValue(DType dtype, double v) {
  if (!IsInt(dtype)) return absl::OkStatus();
  if (FitsIn(dtype, v)) return absl::OkStatus();
  return AttrError("masked_fill", "value",
                   absl::StrCat("= ", v, " cannot be stored in a ", DTypeName(dtype), " tensor"));
}

}  // namespace

namespace ops {

absl::Status CheckIndexDtype(const std::string& op, const TensorMeta& index) {
  if (IsIndexInt(index.dtype)) return absl::OkStatus();
  return Error(Reason::kDtypeMismatch,
               absl::StrCat(op, ": index must be i32 or i64, got ", DTypeName(index.dtype)),
               {{"op", op}, {"dtype", std::string(DTypeName(index.dtype))}});
}

}  // namespace ops

void RegisterIndexingOps(OpRegistry& r) {
  OpDef index_select = Indexing("index_select", {"input", "index"}, kAll);
  index_select.attrs = {RequiredIntAttr("dim")};
  index_select.infer = IndexSelectInfer;
  index_select.backward = SelectBackward(opname::index_add_internal);
  MustAdd(r, std::move(index_select));

  OpDef gather = Indexing("gather", {"input", "index"}, kAll);
  gather.attrs = {RequiredIntAttr("dim")};
  gather.infer = GatherInfer;
  gather.backward = SelectBackward(opname::scatter_add_internal);
  MustAdd(r, std::move(gather));

  OpDef index_add = Indexing("index_add_internal", {"input", "index", "source"}, kFloatInt);
  index_add.attrs = {RequiredIntAttr("dim")};
  index_add.internal = true;
  index_add.infer = ScatterAddInfer("index_add_internal", false);
  index_add.backward = ScatterAddBackward(opname::index_select);
  MustAdd(r, std::move(index_add));

  OpDef scatter_add = Indexing("scatter_add_internal", {"input", "index", "src"}, kFloatInt);
  scatter_add.attrs = {RequiredIntAttr("dim")};
  scatter_add.internal = true;
  scatter_add.infer = ScatterAddInfer("scatter_add_internal", true);
  scatter_add.backward = ScatterAddBackward(opname::gather);
  MustAdd(r, std::move(scatter_add));

  OpDef masked_fill = Indexing("masked_fill", {"input", "mask"}, kAll);
  masked_fill.attrs = {RequiredFloatAttr("value")};
  // Like torch's out-of-place masked_fill, input and mask broadcast against each other.
  masked_fill.infer = [](absl::Span<const TensorMeta> in,
                         const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    if (in[1].dtype != DType::kBool) {
      return Error(Reason::kDtypeMismatch,
                   absl::StrCat("masked_fill: mask must be bool, got ", DTypeName(in[1].dtype)),
                   {{"op", "masked_fill"}, {"dtype", std::string(DTypeName(in[1].dtype))}});
    }
    RETURN_IF_ERROR(CheckFillValue(in[0].dtype, a.GetFloat("value")));
    auto s = BroadcastShapes(in[0].shape, in[1].shape);
    if (!s.ok()) return WithMetadata(s.status(), {{"op", "masked_fill"}});
    return std::vector<TensorMeta>{{in[0].dtype, *s}};
  };
  masked_fill.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx,
                     o.Op(opname::masked_fill, {g.grad_outputs[0], g.inputs[1]}, {{"value", 0.0}}));
    return std::vector<Tensor>{gx, Tensor()};
  };
  MustAdd(r, std::move(masked_fill));

  OpDef one_hot = Indexing("one_hot", {"input"}, kInt);
  one_hot.widen_storage_dtypes = false;  // class indices are i32 or i64, as in PyTorch
  one_hot.attrs = {IntAttr("num_classes", -1)};
  one_hot.marking = Marking::kNonDifferentiable;
  // num_classes = -1 takes max(input) + 1: a data-dependent size the kernel allocates.
  one_hot.infer = [](absl::Span<const TensorMeta> in,
                     const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    const int64_t classes = a.GetInt("num_classes");
    if (classes < -1) {
      return AttrError("one_hot", "num_classes",
                       absl::StrCat("must be -1 (infer) or non-negative, got ", classes));
    }
    if (classes == -1 && NumElements(in[0].shape) == 0) {
      return AttrError("one_hot", "num_classes",
                       "cannot be inferred (-1) from an empty tensor; give it explicitly");
    }
    Shape s = in[0].shape;
    s.push_back(classes);
    return std::vector<TensorMeta>{{DType::kI64, s}};
  };
  MustAdd(r, std::move(one_hot));
}

}  // namespace tensord
