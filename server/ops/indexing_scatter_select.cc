// Client-facing scatters (scatter, scatter_add, index_add) with torch's shape rules, and the
// selections whose output size depends on the data (masked_select, nonzero: infer says -1 and
// the kernel allocates). Gradients reuse the gather/index_select pair and the internal
// scatter-adds of indexing_gather.cc.
#include <cmath>

#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/shape_ops.h"

namespace tensord {
namespace {
using namespace ops;

OpDef Scattering(const std::string& name, std::vector<std::string> inputs) {
  OpDef d;
  d.name = name;
  d.category = "indexing";
  d.min_inputs = d.max_inputs = static_cast<int>(inputs.size());
  d.input_names = std::move(inputs);
  d.attrs = {RequiredIntAttr("dim")};
  d.dtypes = kFloatInt;
  d.marking = Marking::kDifferentiable;
  return d;
}

absl::Status SameDtype(const std::string& op, const std::string& what, const TensorMeta& self,
                       const TensorMeta& other) {
  if (other.dtype == self.dtype) return absl::OkStatus();
  return Error(Reason::kDtypeMismatch,
               absl::StrCat(op, ": ", what, " must have the input's dtype ", DTypeName(self.dtype),
                            ", got ", DTypeName(other.dtype)),
               {{"op", op}, {"dtype", std::string(DTypeName(other.dtype))}});
}

absl::Status ShapeMismatch(const std::string& op, const std::string& what, const Shape& shape) {
  return Error(Reason::kShapeMismatch, absl::StrCat(op, ": ", what),
               {{"op", op}, {"shape", ShapeToString(shape)}});
}

// torch.scatter's rules: input, index and src have one rank (0-d counts as 1-d); the index is
// no larger than src anywhere and no larger than the input outside `dim`. A number for src
// (scatter's value overload, PyTorch's scatter(input, dim, index, value)) fills every indexed
// place, so only the index's rank and its size outside `dim` are checked; the kernel converts
// it to the input's dtype as PyTorch does (truncating toward zero for integers).
absl::StatusOr<std::vector<TensorMeta>> ScatterInfer(const std::string& op,
                                                     absl::Span<const TensorMeta> in,
                                                     const Attrs& a) {
  const Shape &x = in[0].shape, &index = in[1].shape;
  const bool value = op == "scatter" && in[2].wrapped_number;
  // A number fills whatever the index addresses: check it as a src of the index's shape.
  const Shape src = value ? index : in[2].shape;
  RETURN_IF_ERROR(CheckIndexDtype(op, in[1]));
  if (!value) {
    RETURN_IF_ERROR(SameDtype(op, "src", in[0], in[2]));
  }
  ASSIGN_OR_RETURN(int64_t dim, WrapDim(op, "dim", a.GetInt("dim"), x.size()));
  const size_t rank = std::max<size_t>(x.size(), 1);
  if (std::max<size_t>(index.size(), 1) != rank || std::max<size_t>(src.size(), 1) != rank) {
    return ShapeMismatch(
        op,
        absl::StrCat("input ", ShapeToString(x), ", index ", ShapeToString(index), " and src ",
                     ShapeToString(src), " must have the same number of dims"),
        index);
  }
  auto size = [](const Shape& s, size_t d) { return s.empty() ? 1 : s[d]; };
  for (size_t d = 0; d < rank && NumElements(index) > 0; ++d) {
    if (size(index, d) > size(src, d) ||
        (static_cast<int64_t>(d) != dim && size(index, d) > size(x, d))) {
      return ShapeMismatch(
          op,
          absl::StrCat("index ", ShapeToString(index), " is larger than src ", ShapeToString(src),
                       " or than input ", ShapeToString(x), " (outside dim ", dim, ") in dim ", d),
          index);
    }
  }
  return std::vector<TensorMeta>{{in[0].dtype, x}};
}

// The gradient of src reads back where src was written: the index's block of src.
absl::StatusOr<Tensor> SrcGrad(GradOps& o, const Tensor& grad, const Tensor& index,
                               const Tensor& src, int64_t dim) {
  ASSIGN_OR_RETURN(Tensor g, o.Op(opname::gather, {grad, index}, {{"dim", dim}}));
  // Elements of src outside the index's block were never read: zero gradient.
  for (int64_t d = 0; d < src.rank(); ++d) {
    if (g.dim(d) == src.dim(d)) continue;
    ASSIGN_OR_RETURN(
        g, o.Op(opname::slice_backward, {g},
                {{"dim", d}, {"start", int64_t{0}}, {"step", int64_t{1}}, {"size", src.dim(d)}}));
  }
  return g;
}

BackwardFn ScatterBackward(bool add) {
  return [add](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    const int64_t dim = g.attrs.GetInt("dim");
    const Tensor& index = g.inputs[1];
    std::vector<Tensor> grads(3);
    if (g.needs_input_grad[0]) {
      if (add) {
        grads[0] = g.grad_outputs[0];
      } else {
        // Overwritten elements did not reach the output.
        ASSIGN_OR_RETURN(Tensor zeros,
                         o.Op(opname::zeros, {},
                              {{"shape", index.shape()},
                               {"dtype", std::string(DTypeName(g.grad_outputs[0].dtype()))}}));
        ASSIGN_OR_RETURN(grads[0],
                         o.Op(opname::scatter, {g.grad_outputs[0], index, zeros}, {{"dim", dim}}));
      }
    }
    if (g.needs_input_grad[2]) {
      ASSIGN_OR_RETURN(grads[2], SrcGrad(o, g.grad_outputs[0], index, g.inputs[2], dim));
    }
    return grads;
  };
}

absl::StatusOr<std::vector<TensorMeta>> IndexAddInfer(absl::Span<const TensorMeta> in,
                                                      const Attrs& a) {
  const Shape &x = in[0].shape, &index = in[1].shape, &source = in[2].shape;
  RETURN_IF_ERROR(CheckIndexDtype("index_add", in[1]));
  RETURN_IF_ERROR(SameDtype("index_add", "source", in[0], in[2]));
  ASSIGN_OR_RETURN(int64_t dim, WrapDim("index_add", "dim", a.GetInt("dim"), x.size()));
  if (index.size() > 1) {
    return ShapeMismatch("index_add",
                         absl::StrCat("index must be 0-d or 1-d, got shape ", ShapeToString(index)),
                         index);
  }
  const double alpha = a.GetFloat("alpha");
  if (IsInt(in[0].dtype) && alpha != std::trunc(alpha)) {
    return AttrError(
        "index_add", "alpha",
        absl::StrCat("= ", alpha, " must be an integer for a ", DTypeName(in[0].dtype), " input"));
  }
  // A 0-d input is one element along its (implicit) dim, like index_select's.
  Shape want = x.empty() ? Shape{1} : x;
  want[x.empty() ? 0 : dim] = NumElements(index);
  const Shape got = source.empty() ? Shape{1} : source;
  if (got != want || (x.empty() && NumElements(index) != 1)) {
    return ShapeMismatch(
        "index_add",
        absl::StrCat("source ", ShapeToString(source), " must have shape ",
                     ShapeToString(x.empty() ? Shape{} : want), " (input ", ShapeToString(x),
                     " with dim ", dim, " the index's length ", NumElements(index), ")"),
        source);
  }
  return std::vector<TensorMeta>{in[0]};
}

absl::Status CheckMask(const std::string& op, const TensorMeta& mask) {
  if (mask.dtype == DType::kBool) return absl::OkStatus();
  return Error(Reason::kDtypeMismatch,
               absl::StrCat(op, ": mask must be bool, got ", DTypeName(mask.dtype)),
               {{"op", op}, {"dtype", std::string(DTypeName(mask.dtype))}});
}

}  // namespace

void RegisterIndexingScatterSelectOps(OpRegistry& r) {
  for (const char* name : {"scatter", "scatter_add"}) {
    const std::string op = name;
    OpDef d = Scattering(op, {"input", "index", "src"});
    d.infer = [op](absl::Span<const TensorMeta> in, const Attrs& a) {
      return ScatterInfer(op, in, a);
    };
    d.backward = ScatterBackward(op == "scatter_add");
    d.doc =
        op == "scatter"
            ? "out[..., index[p], ...] = src[p] along dim; with repeated indices one of the "
              "written values wins (unspecified which, as in torch). src may be a number "
              "(torch's value overload): it is written at every indexed place, converted to "
              "the input's dtype (a number the dtype cannot hold is refused; a bf16/f16 input is "
              "computed in f32, so there a number beyond its range becomes inf)."
            : "out[..., index[p], ...] += src[p] along dim; repeated indices accumulate.";
    MustAdd(r, std::move(d));
  }

  OpDef index_add = Scattering("index_add", {"input", "index", "source"});
  index_add.attrs.push_back(FloatAttr("alpha", 1));
  index_add.infer = IndexAddInfer;
  index_add.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    std::vector<Tensor> grads(3);
    grads[0] = g.grad_outputs[0];
    if (g.needs_input_grad[2]) {
      GradOps o(g.run);
      ASSIGN_OR_RETURN(Tensor gs, o.Op(opname::index_select, {g.grad_outputs[0], g.inputs[1]},
                                       {{"dim", g.attrs.GetInt("dim")}}));
      if (g.attrs.GetFloat("alpha") != 1) {
        ASSIGN_OR_RETURN(gs, o.Scale(gs, g.attrs.GetFloat("alpha")));
      }
      // A 0-d source (allowed where it is one element) gets a [1] gradient for a 1-d input;
      // the engine reshapes it to the source's shape.
      grads[2] = gs;
    }
    return grads;
  };
  index_add.doc = "out = input; out.index_select(dim, index) += alpha * source (accumulating).";
  MustAdd(r, std::move(index_add));

  OpDef masked_select;
  masked_select.name = "masked_select";
  masked_select.category = "indexing";
  masked_select.min_inputs = masked_select.max_inputs = 2;
  masked_select.input_names = {"input", "mask"};
  masked_select.dtypes = kAll;
  masked_select.marking = Marking::kDifferentiable;
  masked_select.infer = [](absl::Span<const TensorMeta> in,
                           const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(CheckMask("masked_select", in[1]));
    auto s = BroadcastShapes(in[0].shape, in[1].shape);
    if (!s.ok()) return WithMetadata(s.status(), {{"op", "masked_select"}});
    return std::vector<TensorMeta>{{in[0].dtype, Shape{-1}}};
  };
  masked_select.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx,
                     o.Op(opname::masked_select_backward, {g.grad_outputs[0], g.inputs[1]},
                          {{"size", g.inputs[0].shape()}}));
    return std::vector<Tensor>{gx, Tensor()};
  };
  masked_select.doc = "The elements of input (broadcast with mask) where mask is true, as 1-d.";
  MustAdd(r, std::move(masked_select));

  // Zeros of the broadcast shape of `size` and the mask, with grad written at the true places.
  OpDef select_back;
  select_back.name = "masked_select_backward";
  select_back.category = "indexing";
  select_back.min_inputs = select_back.max_inputs = 2;
  select_back.input_names = {"grad", "mask"};
  select_back.attrs = {RequiredIntsAttr("size")};
  select_back.dtypes = kFloat;
  select_back.marking = Marking::kDifferentiable;
  select_back.internal = true;
  select_back.infer = [](absl::Span<const TensorMeta> in,
                         const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(CheckMask("masked_select_backward", in[1]));
    if (in[0].shape.size() != 1) {
      return ShapeMismatch("masked_select_backward",
                           absl::StrCat("grad must be 1-d, got ", ShapeToString(in[0].shape)),
                           in[0].shape);
    }
    auto s = BroadcastShapes(a.GetInts("size"), in[1].shape);
    if (!s.ok()) return WithMetadata(s.status(), {{"op", "masked_select_backward"}});
    return std::vector<TensorMeta>{{in[0].dtype, *s}};
  };
  select_back.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gg, o.Op(opname::masked_select, {g.grad_outputs[0], g.inputs[1]}));
    return std::vector<Tensor>{gg, Tensor()};
  };
  MustAdd(r, std::move(select_back));

  OpDef nonzero;
  nonzero.name = "nonzero";
  nonzero.category = "indexing";
  nonzero.input_names = {"input"};
  nonzero.attrs = {BoolAttr("as_tuple", false)};
  nonzero.dtypes = kAll;
  nonzero.marking = Marking::kNonDifferentiable;
  nonzero.infer = [](absl::Span<const TensorMeta> in,
                     const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    const int64_t rank = static_cast<int64_t>(in[0].shape.size());
    if (!a.GetBool("as_tuple")) return std::vector<TensorMeta>{{DType::kI64, Shape{-1, rank}}};
    // One column per dim; a 0-d input counts as 1-d, as in torch (one tensor of zeros).
    return std::vector<TensorMeta>(std::max<int64_t>(rank, 1), {DType::kI64, Shape{-1}});
  };
  nonzero.doc =
      "i64 [n, rank]: the index of every nonzero element (NaN counts), row-major; as_tuple: "
      "its columns as rank 1-d tensors (one for a 0-d input), as torch's tuple.";
  MustAdd(r, std::move(nonzero));
}

}  // namespace tensord
