// Joining and splitting along a dim: cat, stack (variadic inputs) and split, chunk (a number of
// outputs that depends on the attributes). Each one's gradient is the other direction.
#include "absl/strings/str_join.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/shape_ops.h"

namespace tensord {
namespace {
using namespace ops;

// torch.cat skips 1-d empty tensors whatever the other inputs' shapes (legacy behaviour).
bool LegacyEmpty(const Shape& s) { return s.size() == 1 && s[0] == 0; }

// Output shape of cat; `dim_out` receives the normalised dim (-1 when every input is skipped).
absl::StatusOr<Shape> CatShape(absl::Span<const TensorMeta> in, int64_t dim, int64_t* dim_out) {
  const TensorMeta* ref = nullptr;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].shape.empty()) {
      return Error(Reason::kShapeMismatch,
                   absl::StrCat("cat: input ", i, " is 0-d and cannot be concatenated"),
                   {{"op", "cat"}, {"input_index", absl::StrCat(i)}, {"shape", "[]"}});
    }
    if (ref == nullptr && !LegacyEmpty(in[i].shape)) ref = &in[i];
  }
  *dim_out = -1;
  if (ref == nullptr) return Shape{0};
  const int64_t rank = static_cast<int64_t>(ref->shape.size());
  ASSIGN_OR_RETURN(int64_t d, WrapDim("cat", "dim", dim, rank));
  Shape out = ref->shape;
  out[d] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& s = in[i].shape;
    if (LegacyEmpty(s)) continue;
    bool fits = static_cast<int64_t>(s.size()) == rank;
    for (int64_t k = 0; fits && k < rank; ++k) fits = k == d || s[k] == ref->shape[k];
    if (!fits) {
      return Error(
          Reason::kShapeMismatch,
          absl::StrCat("cat: input ", i, " has shape ", ShapeToString(s), ", which does not match ",
                       ShapeToString(ref->shape), " outside dim ", d),
          {{"op", "cat"},
           {"input_index", absl::StrCat(i)},
           {"shape", ShapeToString(s)},
           {"expected_shape", ShapeToString(ref->shape)}});
    }
    out[d] += s[d];
  }
  *dim_out = d;
  return out;
}

absl::StatusOr<int64_t> StackDim(absl::Span<const TensorMeta> in, int64_t dim) {
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].shape != in[0].shape) {
      return Error(Reason::kShapeMismatch,
                   absl::StrCat("stack: every input must have the same shape; input 0 is ",
                                ShapeToString(in[0].shape), " but input ", i, " is ",
                                ShapeToString(in[i].shape)),
                   {{"op", "stack"},
                    {"input_index", absl::StrCat(i)},
                    {"shape", ShapeToString(in[i].shape)},
                    {"expected_shape", ShapeToString(in[0].shape)}});
    }
  }
  return WrapDim("stack", "dim", dim, static_cast<int64_t>(in[0].shape.size()) + 1);
}

OpDef Variadic(const std::string& name) {
  OpDef d = NewOp(name, "shape", {"tensors"}, kAll, Marking::kDifferentiable);
  d.max_inputs = kVariadic;
  d.attrs = {IntAttr("dim", 0)};
  d.promote_from = 0;  // like torch.cat: inputs of different dtypes meet at the result type
  return d;
}

OpDef Splitting(const std::string& name, AttrSpec pieces) {
  OpDef d = ShapeOp(name, {std::move(pieces), IntAttr("dim", 0)});
  d.infer = [name](absl::Span<const TensorMeta> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(RequireDims(name, in[0].shape));
    const int64_t rank = static_cast<int64_t>(in[0].shape.size());
    ASSIGN_OR_RETURN(int64_t dim, WrapDim(name, "dim", a.GetInt("dim"), rank));
    ASSIGN_OR_RETURN(auto sizes, SplitSizes(name, a, in[0].shape[dim]));
    std::vector<TensorMeta> out;
    for (int64_t s : sizes) {
      TensorMeta m = in[0];
      m.shape[dim] = s;
      out.push_back(std::move(m));
    }
    return out;
  };
  // Pieces nothing flowed into arrive as zeros, so the concatenation has the input's shape.
  d.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    std::vector<Tensor> parts(g.grad_outputs.begin(), g.grad_outputs.end());
    ASSIGN_OR_RETURN(Tensor gx,
                     o.Op(opname::cat, std::move(parts), {{"dim", g.attrs.GetInt("dim")}}));
    return std::vector<Tensor>{gx};
  };
  return d;
}

}  // namespace

namespace ops {

absl::StatusOr<std::vector<int64_t>> SplitSizes(const std::string& op, const Attrs& attrs,
                                                int64_t size) {
  std::vector<int64_t> sizes;
  if (op == "chunk") {
    const int64_t chunks = attrs.GetInt("chunks");
    if (chunks <= 0) {
      return AttrError(op, "chunks", absl::StrCat("must be positive, got ", chunks));
    }
    // torch.chunk: pieces of ceil(size / chunks), so fewer than `chunks` pieces may come
    // back; an empty dim still yields `chunks` empty pieces.
    if (size == 0) return std::vector<int64_t>(chunks, 0);
    const int64_t piece = (size + chunks - 1) / chunks;
    for (int64_t at = 0; at < size; at += piece) sizes.push_back(std::min(piece, size - at));
    return sizes;
  }
  const std::vector<int64_t> given = attrs.GetInts("split_size");
  if (given.size() == 1) {
    // One value is torch's integer split_size: equal pieces, the last one shorter.
    const int64_t piece = given[0];
    if (piece < 0 || (piece == 0 && size != 0)) {
      return AttrError(op, "split_size",
                       absl::StrCat("must be positive (0 only for an empty dim), got ", piece,
                                    " for a dim of size ", size));
    }
    if (size == 0) return std::vector<int64_t>{0};
    for (int64_t at = 0; at < size; at += piece) sizes.push_back(std::min(piece, size - at));
    return sizes;
  }
  int64_t total = 0;
  for (int64_t s : given) {
    if (s < 0) return AttrError(op, "split_size", absl::StrCat("has negative size ", s));
    total += s;
  }
  if (given.empty() || total != size) {
    return AttrError(op, "split_size",
                     absl::StrCat("sizes [", absl::StrJoin(given, ", "), "] must sum to ", size,
                                  " (the size of the split dim), got ", total));
  }
  return given;
}

}  // namespace ops

void RegisterShapeJoinOps(OpRegistry& r) {
  OpDef cat = Variadic("cat");
  cat.infer = [](absl::Span<const TensorMeta> in,
                 const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    int64_t dim;
    ASSIGN_OR_RETURN(Shape s, CatShape(in, a.GetInt("dim"), &dim));
    return std::vector<TensorMeta>{{in[0].dtype, s}};
  };
  cat.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    std::vector<TensorMeta> metas;
    for (const Tensor& t : g.inputs) metas.push_back(t.meta());
    int64_t dim;
    ASSIGN_OR_RETURN(Shape s, CatShape(metas, g.attrs.GetInt("dim"), &dim));
    GradOps o(g.run);
    std::vector<Tensor> grads(g.inputs.size());
    int64_t offset = 0;
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      if (dim < 0 || LegacyEmpty(g.inputs[i].shape())) continue;  // skipped by the forward
      const int64_t len = g.inputs[i].dim(dim);
      if (g.needs_input_grad[i]) {
        ASSIGN_OR_RETURN(grads[i], o.Op(opname::narrow, {g.grad_outputs[0]},
                                        {{"dim", dim}, {"start", offset}, {"length", len}}));
      }
      offset += len;
    }
    return grads;
  };
  MustAdd(r, std::move(cat));

  OpDef stack = Variadic("stack");
  stack.infer = [](absl::Span<const TensorMeta> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(int64_t dim, StackDim(in, a.GetInt("dim")));
    Shape s = in[0].shape;
    s.insert(s.begin() + dim, static_cast<int64_t>(in.size()));
    return std::vector<TensorMeta>{{in[0].dtype, s}};
  };
  stack.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    std::vector<TensorMeta> metas;
    for (const Tensor& t : g.inputs) metas.push_back(t.meta());
    ASSIGN_OR_RETURN(int64_t dim, StackDim(metas, g.attrs.GetInt("dim")));
    GradOps o(g.run);
    std::vector<Tensor> grads(g.inputs.size());
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      if (!g.needs_input_grad[i]) continue;
      ASSIGN_OR_RETURN(
          Tensor slab,
          o.Op(opname::narrow, {g.grad_outputs[0]},
               {{"dim", dim}, {"start", static_cast<int64_t>(i)}, {"length", int64_t{1}}}));
      ASSIGN_OR_RETURN(grads[i], o.Reshape(slab, g.inputs[i].shape()));
    }
    return grads;
  };
  MustAdd(r, std::move(stack));

  OpDef split =
      Splitting("split", Aliased(RequiredIntsAttr("split_size"), {"split_size_or_sections"}));
  split.doc =
      "split_size is an int (equal pieces, the last one shorter) or a list of piece sizes that "
      "sum to the dim's size; a one-element list is read as the int, as the wire cannot tell "
      "them apart.";
  MustAdd(r, std::move(split));
  MustAdd(r, Splitting("chunk", RequiredIntAttr("chunks")));
}

}  // namespace tensord
