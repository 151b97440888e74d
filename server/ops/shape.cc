// Shape and indexing ops. Views (reshape, squeeze, ...) share storage with their input: they
// are free, and `assign` through one is visible through the other, as with PyTorch views.
#include "server/ops/op_helpers.h"

namespace tensord {
namespace {
using namespace ops;

OpDef Unary(const std::string& name, DTypeSet dtypes, Marking marking) {
  OpDef d;
  d.name = name;
  d.category = "shape";
  d.input_names = {"input"};
  d.dtypes = dtypes;
  d.marking = marking;
  return d;
}

absl::StatusOr<Shape> ResolveReshape(const Shape& in, std::vector<int64_t> shape) {
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) return AttrError("reshape", "shape", "has more than one -1");
      infer_at = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      return AttrError("reshape", "shape", absl::StrCat("has negative dimension ", shape[i]));
    } else {
      known *= shape[i];
    }
  }
  const int64_t n = NumElements(in);
  if (infer_at >= 0) {
    if (known == 0 || n % known != 0) {
      return ShapeError("reshape", absl::StrCat("cannot reshape ", ShapeToString(in), " to ",
                                                ShapeToString(shape)));
    }
    shape[infer_at] = n / known;
  } else if (known != n) {
    return ShapeError("reshape", absl::StrCat("cannot reshape ", ShapeToString(in), " (", n,
                                              " elements) to ", ShapeToString(shape)));
  }
  return shape;
}

}  // namespace

absl::StatusOr<Shape> ExpandedShape(const Shape& in, const std::vector<int64_t>& size) {
  if (size.size() < in.size()) {
    return ShapeError("expand", absl::StrCat("size ", ShapeToString(size), " has fewer dims than ",
                                             ShapeToString(in)));
  }
  Shape out(size.size());
  const size_t offset = size.size() - in.size();
  for (size_t i = 0; i < size.size(); ++i) {
    int64_t src = i < offset ? 1 : in[i - offset];
    int64_t want = size[i] == -1 ? src : size[i];
    if (i < offset && size[i] == -1) {
      return AttrError("expand", "size", "-1 is not allowed for new leading dims");
    }
    if (src != want && src != 1) {
      return ShapeError(
          "expand", absl::StrCat("cannot expand ", ShapeToString(in), " to ", ShapeToString(size)));
    }
    out[i] = want;
  }
  return out;
}

void RegisterShapeOps(OpRegistry& r) {
  OpDef reshape = Unary("reshape", kAll, Marking::kDifferentiable);
  reshape.attrs = {RequiredIntsAttr("shape")};
  reshape.view = true;
  reshape.infer = [](absl::Span<const TensorMeta> in,
                     const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(Shape s, ResolveReshape(in[0].shape, a.GetInts("shape")));
    return std::vector<TensorMeta>{{in[0].dtype, s}};
  };
  reshape.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Reshape(g.grad_outputs[0], g.inputs[0].shape()));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(reshape));

  OpDef expand = Unary("expand", kAll, Marking::kDifferentiable);
  expand.attrs = {RequiredIntsAttr("size")};
  expand.infer = [](absl::Span<const TensorMeta> in,
                    const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(Shape s, ExpandedShape(in[0].shape, a.GetInts("size")));
    return std::vector<TensorMeta>{{in[0].dtype, s}};
  };
  // The engine sums the broadcast gradient back to the input shape.
  expand.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    return std::vector<Tensor>{g.grad_outputs[0]};
  };
  MustAdd(r, std::move(expand));

  OpDef cast = Unary("to_dtype", kAll, Marking::kDifferentiable);
  cast.attrs = {{"dtype", AttrType::kDType, {}, true}};
  cast.infer = [](absl::Span<const TensorMeta> in,
                  const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    return std::vector<TensorMeta>{{*a.GetDType("dtype"), in[0].shape}};
  };
  // Between float dtypes the gradient is cast back by the engine; to int/bool outputs are
  // plain tensors (the engine only tracks float outputs), so this is "n" for those casts.
  cast.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    return std::vector<Tensor>{g.grad_outputs[0]};
  };
  MustAdd(r, std::move(cast));
}

}  // namespace tensord
