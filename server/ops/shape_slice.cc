// Contiguous copies of a range along one dim: narrow (start, length) and slice (Python-style
// start/end/step), plus slice_backward, the internal op their gradients are written with: it
// places a gradient back at the sliced positions of a zero tensor of the input's shape.
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/shape_ops.h"

namespace tensord {
namespace {
using namespace ops;

InferFn SliceInfer(absl::StatusOr<SliceSpec> (*resolve)(const Shape&, const Attrs&)) {
  return [resolve](absl::Span<const TensorMeta> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(SliceSpec s, resolve(in[0].shape, a));
    TensorMeta m = in[0];
    m.shape[s.dim] = s.length;
    return std::vector<TensorMeta>{m};
  };
}

BackwardFn SliceBackward(absl::StatusOr<SliceSpec> (*resolve)(const Shape&, const Attrs&)) {
  return [resolve](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    const Shape& in = g.inputs[0].shape();
    ASSIGN_OR_RETURN(SliceSpec s, resolve(in, g.attrs));
    GradOps o(g.run);
    ASSIGN_OR_RETURN(
        Tensor gx,
        o.Op(opname::slice_backward, {g.grad_outputs[0]},
             {{"dim", s.dim}, {"start", s.start}, {"step", s.step}, {"size", in[s.dim]}}));
    return std::vector<Tensor>{gx};
  };
}

// Python's clamping of a slice bound into [0, size].
int64_t ClampBound(int64_t v, int64_t size) {
  if (v < 0) v += size;
  return std::min(std::max<int64_t>(v, 0), size);
}

}  // namespace

namespace ops {

absl::StatusOr<SliceSpec> ResolveSlice(const Shape& in, const Attrs& a) {
  RETURN_IF_ERROR(RequireDims("slice", in));
  SliceSpec s;
  ASSIGN_OR_RETURN(s.dim, WrapDim("slice", "dim", a.GetInt("dim"), in.size()));
  s.step = a.GetInt("step");
  if (s.step <= 0) {
    return AttrError("slice", "step", absl::StrCat("must be positive, got ", s.step));
  }
  const int64_t size = in[s.dim];
  s.start = a.Has("start") ? ClampBound(a.GetInt("start"), size) : 0;
  const int64_t end = a.Has("end") ? ClampBound(a.GetInt("end"), size) : size;
  // 1 + (span - 1) / step rather than a rounded-up division, which overflows for huge steps.
  s.length = end > s.start ? 1 + (end - s.start - 1) / s.step : 0;
  return s;
}

absl::StatusOr<SliceSpec> ResolveNarrow(const Shape& in, const Attrs& a) {
  RETURN_IF_ERROR(RequireDims("narrow", in));
  SliceSpec s;
  ASSIGN_OR_RETURN(s.dim, WrapDim("narrow", "dim", a.GetInt("dim"), in.size()));
  const int64_t size = in[s.dim];
  const int64_t start = a.GetInt("start");
  s.length = a.GetInt("length");
  if (start < -size || start > size) {
    return AttrError("narrow", "start",
                     absl::StrCat("= ", start, " is out of range for dim ", s.dim, " of size ",
                                  size, " (expected [", -size, ", ", size, "])"));
  }
  s.start = start < 0 ? start + size : start;
  if (s.length < 0 || s.length > size - s.start) {
    return AttrError("narrow", "length",
                     absl::StrCat("= ", s.length, " from start ", s.start, " does not fit in dim ",
                                  s.dim, " of size ", size));
  }
  return s;
}

}  // namespace ops

void RegisterShapeSliceOps(OpRegistry& r) {
  OpDef narrow = ShapeOp(
      "narrow", {RequiredIntAttr("dim"), RequiredIntAttr("start"), RequiredIntAttr("length")});
  narrow.infer = SliceInfer(ResolveNarrow);
  narrow.backward = SliceBackward(ResolveNarrow);
  MustAdd(r, std::move(narrow));

  OpDef slice = ShapeOp("slice", {IntAttr("dim", 0), OptionalIntAttr("start"),
                                  OptionalIntAttr("end"), IntAttr("step", 1)});
  slice.infer = SliceInfer(ResolveSlice);
  slice.backward = SliceBackward(ResolveSlice);
  slice.doc = "input[..., start:end:step] along dim, with Python's clamping of start and end.";
  MustAdd(r, std::move(slice));

  // Attributes are already normalised by the forward op (start in range, step > 0).
  OpDef back = ShapeOp("slice_backward", {RequiredIntAttr("dim"), RequiredIntAttr("start"),
                                          RequiredIntAttr("step"), RequiredIntAttr("size")});
  back.input_names = {"grad"};
  back.dtypes = kFloatInt;
  back.internal = true;
  back.infer = [](absl::Span<const TensorMeta> in,
                  const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(RequireDims("slice_backward", in[0].shape));
    ASSIGN_OR_RETURN(int64_t dim,
                     WrapDim("slice_backward", "dim", a.GetInt("dim"), in[0].shape.size()));
    const int64_t len = in[0].shape[dim], start = a.GetInt("start"), step = a.GetInt("step");
    const int64_t size = a.GetInt("size");
    if (start < 0 || step <= 0 || size < 0 || (len > 0 && start + (len - 1) * step >= size)) {
      return AttrError("slice_backward", "start",
                       absl::StrCat("start ", start, ", step ", step, " and ", len,
                                    " elements do not fit in a dim of size ", size));
    }
    TensorMeta m = in[0];
    m.shape[dim] = size;
    return std::vector<TensorMeta>{m};
  };
  back.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    const int64_t dim = g.attrs.GetInt("dim"), start = g.attrs.GetInt("start");
    const int64_t step = g.attrs.GetInt("step");
    const int64_t len = g.inputs[0].dim(dim < 0 ? dim + g.inputs[0].rank() : dim);
    GradOps o(g.run);
    ASSIGN_OR_RETURN(
        Tensor gx,
        o.Op(opname::slice, {g.grad_outputs[0]},
             {{"dim", dim}, {"start", start}, {"end", start + len * step}, {"step", step}}));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(back));
}

}  // namespace tensord
