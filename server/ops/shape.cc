// Shape and indexing ops. Views (reshape, squeeze, ...) share storage with their input: they
// are free, and `assign` through one is visible through the other, as with PyTorch views.
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/shape_ops.h"

namespace tensord {
namespace {
using namespace ops;

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

// The gradient of every op that only relabels dims (flatten, squeeze, unsqueeze).
absl::StatusOr<std::vector<Tensor>> ReshapeBack(const GradContext& g) {
  GradOps o(g.run);
  ASSIGN_OR_RETURN(Tensor gx, o.Reshape(g.grad_outputs[0], g.inputs[0].shape()));
  return std::vector<Tensor>{gx};
}

absl::StatusOr<std::vector<Tensor>> IdentityBack(const GradContext& g) {
  return std::vector<Tensor>{g.grad_outputs[0]};
}

absl::StatusOr<Shape> FlattenShape(const Shape& in, const Attrs& a) {
  const int64_t rank = static_cast<int64_t>(in.size());
  ASSIGN_OR_RETURN(int64_t start, WrapDim("flatten", "start_dim", a.GetInt("start_dim"), rank));
  ASSIGN_OR_RETURN(int64_t end, WrapDim("flatten", "end_dim", a.GetInt("end_dim"), rank));
  if (start > end) {
    return AttrError("flatten", "start_dim",
                     absl::StrCat("(", a.GetInt("start_dim"), ") cannot come after end_dim (",
                                  a.GetInt("end_dim"), ")"));
  }
  if (rank == 0) return Shape{1};  // torch.flatten of a 0-d tensor is 1-d
  Shape out(in.begin(), in.begin() + start);
  out.push_back(NumElements(absl::MakeConstSpan(in).subspan(start, end - start + 1)));
  out.insert(out.end(), in.begin() + end + 1, in.end());
  return out;
}

// Absent dim: drop every size-1 dim; given dims: drop those of size 1, keep the others.
absl::StatusOr<Shape> SqueezeShape(const Shape& in, const Attrs& a) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<bool> drop(in.size(), !a.Has("dim"));
  for (int64_t d : a.GetInts("dim")) {
    ASSIGN_OR_RETURN(int64_t nd, WrapDim("squeeze", "dim", d, rank));
    if (rank == 0) continue;
    if (drop[nd]) return AttrError("squeeze", "dim", absl::StrCat("repeats dim ", d));
    drop[nd] = true;
  }
  Shape out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!(drop[d] && in[d] == 1)) out.push_back(in[d]);
  }
  return out;
}

// Inverse of a permutation: inv[dims[i]] = i.
std::vector<int64_t> InversePermutation(const std::vector<int64_t>& dims) {
  std::vector<int64_t> inv(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inv[dims[i]] = static_cast<int64_t>(i);
  return inv;
}

}  // namespace

namespace ops {

OpDef ShapeOp(const std::string& name, std::vector<AttrSpec> attrs, DTypeSet dtypes,
              Marking marking) {
  OpDef d = NewOp(name, "shape", {"input"}, dtypes, marking);
  d.attrs = std::move(attrs);
  return d;
}

absl::StatusOr<int64_t> WrapDim(const std::string& op, const std::string& attr, int64_t dim,
                                int64_t rank, bool allow_scalar) {
  const int64_t r = rank == 0 && allow_scalar ? 1 : rank;
  if (dim < -r || dim >= r) {
    std::string range =
        r == 0 ? "no dim is valid" : absl::StrCat("expected a dim in [", -r, ", ", r - 1, "]");
    return Error(Reason::kBadAttribute,
                 absl::StrCat(op, ": attribute '", attr, "' = ", dim,
                              " is out of range for a tensor of rank ", rank, " (", range, ")"),
                 {{"op", op},
                  {"attribute", attr},
                  {"value", absl::StrCat(dim)},
                  {"rank", absl::StrCat(rank)}});
  }
  return dim < 0 ? dim + r : dim;
}

absl::Status RequireDims(const std::string& op, const Shape& shape) {
  if (!shape.empty()) return absl::OkStatus();
  return Error(Reason::kShapeMismatch,
               absl::StrCat(op, ": cannot be applied to a 0-d tensor (shape [])"),
               {{"op", op}, {"shape", "[]"}});
}

absl::StatusOr<std::vector<int64_t>> TransposePermutation(const Attrs& attrs, int64_t rank) {
  std::vector<int64_t> perm(rank);
  for (int64_t d = 0; d < rank; ++d) perm[d] = d;
  if (rank == 0) return perm;
  ASSIGN_OR_RETURN(int64_t d0, WrapDim("transpose", "dim0", attrs.GetInt("dim0"), rank));
  ASSIGN_OR_RETURN(int64_t d1, WrapDim("transpose", "dim1", attrs.GetInt("dim1"), rank));
  std::swap(perm[d0], perm[d1]);
  return perm;
}

absl::StatusOr<std::vector<int64_t>> NormalizePermutation(const std::string& op,
                                                          const std::vector<int64_t>& dims,
                                                          int64_t rank) {
  if (static_cast<int64_t>(dims.size()) != rank) {
    return AttrError(
        op, "dims",
        absl::StrCat("has ", dims.size(), " entries but the input has ", rank, " dims"));
  }
  std::vector<int64_t> out;
  std::vector<bool> seen(rank, false);
  for (int64_t d : dims) {
    ASSIGN_OR_RETURN(int64_t nd, WrapDim(op, "dims", d, rank, false));
    if (seen[nd]) return AttrError(op, "dims", absl::StrCat("repeats dim ", d));
    seen[nd] = true;
    out.push_back(nd);
  }
  return out;
}

}  // namespace ops

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
  OpDef reshape = ShapeOp("reshape", {RequiredIntsAttr("shape")});
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

  OpDef expand = ShapeOp("expand", {RequiredIntsAttr("size")});
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

  OpDef cast = ShapeOp("to_dtype", {{"dtype", AttrType::kDType, {}, true}});
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

  OpDef flatten = ShapeOp("flatten", {IntAttr("start_dim", 0), IntAttr("end_dim", -1)});
  flatten.view = true;
  flatten.infer = [](absl::Span<const TensorMeta> in,
                     const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(Shape s, FlattenShape(in[0].shape, a));
    return std::vector<TensorMeta>{{in[0].dtype, s}};
  };
  flatten.backward = ReshapeBack;
  MustAdd(r, std::move(flatten));

  OpDef squeeze = ShapeOp("squeeze", {IntsAttr("dim")});
  squeeze.view = true;
  squeeze.infer = [](absl::Span<const TensorMeta> in,
                     const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(Shape s, SqueezeShape(in[0].shape, a));
    return std::vector<TensorMeta>{{in[0].dtype, s}};
  };
  squeeze.backward = ReshapeBack;
  MustAdd(r, std::move(squeeze));

  OpDef unsqueeze = ShapeOp("unsqueeze", {RequiredIntAttr("dim")});
  unsqueeze.view = true;
  unsqueeze.infer = [](absl::Span<const TensorMeta> in,
                       const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    Shape s = in[0].shape;
    ASSIGN_OR_RETURN(int64_t d, WrapDim("unsqueeze", "dim", a.GetInt("dim"),
                                        static_cast<int64_t>(s.size()) + 1));
    s.insert(s.begin() + d, 1);
    return std::vector<TensorMeta>{{in[0].dtype, s}};
  };
  unsqueeze.backward = ReshapeBack;
  MustAdd(r, std::move(unsqueeze));

  OpDef permute = ShapeOp("permute", {RequiredIntsAttr("dims")});
  permute.infer = [](absl::Span<const TensorMeta> in,
                     const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    const Shape& x = in[0].shape;
    ASSIGN_OR_RETURN(auto dims, NormalizePermutation("permute", a.GetInts("dims"),
                                                     static_cast<int64_t>(x.size())));
    Shape s;
    for (int64_t d : dims) s.push_back(x[d]);
    return std::vector<TensorMeta>{{in[0].dtype, s}};
  };
  permute.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    ASSIGN_OR_RETURN(auto dims,
                     NormalizePermutation("permute", g.attrs.GetInts("dims"), g.inputs[0].rank()));
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::permute, {g.grad_outputs[0]},
                                     {{"dims", InversePermutation(dims)}}));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(permute));

  OpDef transpose = ShapeOp("transpose", {RequiredIntAttr("dim0"), RequiredIntAttr("dim1")});
  transpose.infer = [](absl::Span<const TensorMeta> in,
                       const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    Shape s = in[0].shape;
    const int64_t rank = static_cast<int64_t>(s.size());
    ASSIGN_OR_RETURN(int64_t d0, WrapDim("transpose", "dim0", a.GetInt("dim0"), rank));
    ASSIGN_OR_RETURN(int64_t d1, WrapDim("transpose", "dim1", a.GetInt("dim1"), rank));
    if (rank > 0) std::swap(s[d0], s[d1]);
    return std::vector<TensorMeta>{{in[0].dtype, s}};
  };
  transpose.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::transpose, {g.grad_outputs[0]}, g.attrs.map()));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(transpose));

  // The server keeps every tensor contiguous, so both are plain copies (a fresh storage that
  // a later assign into the input does not see).
  for (const char* name : {"contiguous", "clone"}) {
    OpDef copy = ShapeOp(name);
    copy.infer = SameAs(0);
    copy.backward = IdentityBack;
    MustAdd(r, std::move(copy));
  }

  OpDef detach = ShapeOp("detach", {}, kAll, Marking::kNonDifferentiable);
  detach.view = true;
  detach.infer = SameAs(0);
  detach.doc = "The input's value as a plain tensor (shares storage, no autodiff identity).";
  MustAdd(r, std::move(detach));

  RegisterShapeJoinOps(r);
  RegisterShapeSliceOps(r);
  RegisterIndexingOps(r);
  RegisterShapeDeviceOps(r);
  RegisterShapeRearrangeOps(r);
  RegisterPadOps(r);
  RegisterIndexingScatterSelectOps(r);
  RegisterSortingOps(r);
}

}  // namespace tensord
