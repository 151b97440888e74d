// Linear-algebra products and diagonals: dot, outer, addmm, baddbmm and trace are composites over
// matmul, mul, add and sum (gradients and the oneDNN matmul come with them); diagonal is a strided
// gather with its own kernel, and its gradient, diagonal_backward, scatters into zeros. diag is
// either of the two, by rank.
#include "server/ops/linalg_products.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/ops/nn_geometry.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/shape_ops.h"

namespace tensord {
namespace {
using namespace ops;

using Tensors = std::vector<Tensor>;

OpDef LinalgOp(const std::string& name, std::vector<std::string> inputs) {
  return NewOp(name, "linalg", std::move(inputs), kFloat, Marking::kDifferentiable);
}

absl::Status SameDtypes(const std::string& op, absl::Span<const Tensor> in) {
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].dtype() != in[0].dtype()) {
      return Error(Reason::kDtypeMismatch,
                   absl::StrCat(op, ": expected all operands to have one dtype, got ",
                                DTypeName(in[0].dtype()), " (input 0) and ",
                                DTypeName(in[i].dtype()), " (input ", i, ")"),
                   {{"op", op}, {"dtype", std::string(DTypeName(in[i].dtype()))}});
    }
  }
  return absl::OkStatus();
}

absl::Status RequireRank(const std::string& op, const std::string& what, const Tensor& t,
                         int64_t rank) {
  if (t.rank() == rank) return absl::OkStatus();
  return Error(
      Reason::kShapeMismatch,
      absl::StrCat(op, ": ", what, " must be ", rank, "-d, got shape ", ShapeToString(t.shape())),
      {{"op", op}, {"shape", ShapeToString(t.shape())}});
}

absl::StatusOr<Tensors> Dot(OpRunner& run, absl::Span<const Tensor> in, const Attrs&) {
  RETURN_IF_ERROR(RequireRank("dot", "input", in[0], 1));
  RETURN_IF_ERROR(RequireRank("dot", "tensor", in[1], 1));
  RETURN_IF_ERROR(SameDtypes("dot", in));
  if (in[0].dim(0) != in[1].dim(0)) {
    return nn::ShapeErrorWithShapes("dot", in[0].shape(), in[1].shape(), "have different lengths");
  }
  ASSIGN_OR_RETURN(Tensor out, run.Run1(opname::matmul, {in[0], in[1]}));
  return Tensors{out};
}

// A column times a row: one broadcast multiply, exact (no sums), with mul's type promotion.
absl::StatusOr<Tensors> Outer(OpRunner& run, absl::Span<const Tensor> in, const Attrs&) {
  RETURN_IF_ERROR(RequireRank("outer", "input", in[0], 1));
  RETURN_IF_ERROR(RequireRank("outer", "vec2", in[1], 1));
  ASSIGN_OR_RETURN(Tensor col,
                   run.Run1(opname::reshape, {in[0]}, {{"shape", Shape{in[0].dim(0), 1}}}));
  ASSIGN_OR_RETURN(Tensor out, run.Run1(opname::mul, {col, in[1]}));
  return Tensors{out};
}

// beta * input + alpha * product, as torch.addmm/baddbmm: the input must broadcast to the
// product's shape without growing it, and beta = 0 ignores its values (NaN and inf included)
// while still giving it a (zero) gradient.
absl::StatusOr<Tensors> AddProduct(OpRunner& run, const std::string& op, const Tensor& input,
                                   Tensor product, const Attrs& a) {
  auto shape = BroadcastShapes(product.shape(), input.shape());
  if (!shape.ok() || *shape != product.shape()) {
    return Error(
        Reason::kShapeMismatch,
        absl::StrCat(op, ": input of shape ", ShapeToString(input.shape()),
                     " does not broadcast to the product's shape ", ShapeToString(product.shape())),
        {{"op", op}, {"shape", ShapeToString(input.shape())}});
  }
  const double alpha = a.GetFloat("alpha"), beta = a.GetFloat("beta");
  if (alpha != 1) {
    ASSIGN_OR_RETURN(product, run.Run1(opname::mul, {product, GradOps::Scalar(alpha)}));
  }
  if (beta == 0) {
    ASSIGN_OR_RETURN(Tensor out,
                     run.Run1(opname::where, {Tensor::Scalar<bool>(false), input, product}));
    return Tensors{out};
  }
  Tensor scaled = input;
  if (beta != 1) {
    ASSIGN_OR_RETURN(scaled, run.Run1(opname::mul, {input, GradOps::Scalar(beta)}));
  }
  ASSIGN_OR_RETURN(Tensor out, run.Run1(opname::add, {scaled, product}));
  return Tensors{out};
}

absl::StatusOr<Tensors> Addmm(OpRunner& run, absl::Span<const Tensor> in, const Attrs& a) {
  RETURN_IF_ERROR(RequireRank("addmm", "mat1", in[1], 2));
  RETURN_IF_ERROR(RequireRank("addmm", "mat2", in[2], 2));
  RETURN_IF_ERROR(SameDtypes("addmm", in));
  if (in[1].dim(1) != in[2].dim(0)) {
    return nn::ShapeErrorWithShapes("addmm", in[1].shape(), in[2].shape(),
                                    "cannot be multiplied (mat1 columns != mat2 rows)");
  }
  ASSIGN_OR_RETURN(Tensor product, run.Run1(opname::mm, {in[1], in[2]}));
  return AddProduct(run, "addmm", in[0], product, a);
}

absl::StatusOr<Tensors> Baddbmm(OpRunner& run, absl::Span<const Tensor> in, const Attrs& a) {
  RETURN_IF_ERROR(RequireRank("baddbmm", "batch1", in[1], 3));
  RETURN_IF_ERROR(RequireRank("baddbmm", "batch2", in[2], 3));
  RETURN_IF_ERROR(SameDtypes("baddbmm", in));
  const Shape &b1 = in[1].shape(), &b2 = in[2].shape();
  if (b1[0] != b2[0] || b1[2] != b2[1]) {
    return nn::ShapeErrorWithShapes(
        "baddbmm", b1, b2,
        absl::StrCat("cannot be multiplied: batch2 should be [", b1[0], ", ", b1[2], ", m]"));
  }
  ASSIGN_OR_RETURN(Tensor product, run.Run1(opname::bmm, {in[1], in[2]}));
  return AddProduct(run, "baddbmm", in[0], product, a);
}

// addmm and baddbmm: beta * input + alpha * the product `add_product` takes of the other two.
OpDef AddProductOp(const std::string& name, std::vector<std::string> inputs,
                   CompositeFn add_product) {
  OpDef d = LinalgOp(name, std::move(inputs));
  d.attrs = {FloatAttr("beta", 1.0), FloatAttr("alpha", 1.0)};
  d.composite = ComputeLowPrecisionInF32(std::move(add_product));
  return d;
}

AttrMap DiagonalAttrs(int64_t offset, int64_t dim1, int64_t dim2) {
  return {{"offset", offset}, {"dim1", dim1}, {"dim2", dim2}};
}

absl::StatusOr<Tensors> Trace(OpRunner& run, absl::Span<const Tensor> in, const Attrs&) {
  RETURN_IF_ERROR(RequireRank("trace", "input", in[0], 2));
  ASSIGN_OR_RETURN(Tensor d, run.Run1(opname::diagonal, {in[0]}, DiagonalAttrs(0, 0, 1)));
  ASSIGN_OR_RETURN(Tensor out, run.Run1(opname::sum, {d}));
  return Tensors{out};
}

// 2-d: the k-th diagonal as a vector. 1-d: a square matrix with the vector on diagonal k.
absl::StatusOr<Tensors> Diag(OpRunner& run, absl::Span<const Tensor> in, const Attrs& a) {
  const Tensor& x = in[0];
  const int64_t k = a.GetInt("diagonal");
  if (x.rank() == 2) {
    // An offset past the matrix gives an empty vector, as torch.diagonal and numpy.diag do
    // (torch 1.13's diag fails there with an internal size overflow instead).
    ASSIGN_OR_RETURN(Tensor out, run.Run1(opname::diagonal, {x}, DiagonalAttrs(k, 0, 1)));
    return Tensors{out};
  }
  if (x.rank() != 1) {
    return Error(
        Reason::kShapeMismatch,
        absl::StrCat("diag: expected a 1-d or 2-d tensor, got shape ", ShapeToString(x.shape())),
        {{"op", "diag"}, {"shape", ShapeToString(x.shape())}});
  }
  int64_t n = 0;
  if (k == INT64_MIN || __builtin_add_overflow(x.dim(0), k < 0 ? -k : k, &n)) {
    return Error(Reason::kLimitExceeded,
                 absl::StrCat("diag: a vector of ", x.dim(0), " elements on diagonal ", k,
                              " needs a matrix too large to index"),
                 {{"op", "diag"}, {"limit", "element_count"}, {"value", absl::StrCat(k)}});
  }
  AttrMap attrs = DiagonalAttrs(k, 0, 1);
  attrs["shape"] = Shape{n, n};
  ASSIGN_OR_RETURN(Tensor out, run.Run1(opname::diagonal_backward, {x}, attrs));
  return Tensors{out};
}

absl::StatusOr<DiagonalSpec> DiagonalOf(const Shape& in, const Attrs& a) {
  return ResolveDiagonal("diagonal", in, a.GetInt("offset"), a.GetInt("dim1"), a.GetInt("dim2"));
}

}  // namespace

namespace ops {

absl::StatusOr<DiagonalSpec> ResolveDiagonal(const std::string& op, const Shape& in, int64_t offset,
                                             int64_t dim1, int64_t dim2) {
  const int64_t rank = static_cast<int64_t>(in.size());
  DiagonalSpec s;
  ASSIGN_OR_RETURN(s.dim1, WrapDim(op, "dim1", dim1, rank, /*allow_scalar=*/false));
  ASSIGN_OR_RETURN(s.dim2, WrapDim(op, "dim2", dim2, rank, /*allow_scalar=*/false));
  if (s.dim1 == s.dim2) {
    return AttrError(op, "dim2",
                     absl::StrCat("= ", dim2, " names the same dim as dim1 = ", dim1,
                                  " (diagonal dims must differ)"));
  }
  const int64_t rows = in[s.dim1], cols = in[s.dim2];
  // Neither difference can overflow: sizes are >= 0 and the offset's sign is checked first.
  s.length = std::max<int64_t>(
      0, offset >= 0 ? std::min(rows, cols - offset) : std::min(rows + offset, cols));
  const std::vector<int64_t> strides = ContiguousStrides(in);
  for (int64_t d = 0; d < rank; ++d) {
    if (d == s.dim1 || d == s.dim2) continue;
    s.out.push_back(in[d]);
    s.window_strides.push_back(strides[d]);
  }
  s.out.push_back(s.length);
  s.window_strides.push_back(strides[s.dim1] + strides[s.dim2]);
  if (s.length > 0) {
    s.window_offset = offset >= 0 ? offset * strides[s.dim2] : -offset * strides[s.dim1];
  }
  return s;
}

CompositeFn ComputeLowPrecisionInF32(CompositeFn f) {
  return [f](OpRunner& run, absl::Span<const Tensor> in,
             const Attrs& a) -> absl::StatusOr<Tensors> {
    const DType dtype = in.empty() ? DType::kF32 : in[0].dtype();
    const bool low =
        IsLowPrecision(dtype) &&
        std::all_of(in.begin(), in.end(), [&](const Tensor& t) { return t.dtype() == dtype; });
    if (!low) return f(run, in, a);
    Tensors wide;
    for (const Tensor& t : in) {
      ASSIGN_OR_RETURN(Tensor w, run.Run1(opname::to_dtype, {t}, {{"dtype", std::string("f32")}}));
      wide.push_back(std::move(w));
    }
    ASSIGN_OR_RETURN(Tensors out, f(run, wide, a));
    for (Tensor& t : out) {
      ASSIGN_OR_RETURN(t,
                       run.Run1(opname::to_dtype, {t}, {{"dtype", std::string(DTypeName(dtype))}}));
    }
    return out;
  };
}

}  // namespace ops

void RegisterLinalgProductOps(OpRegistry& r) {
  OpDef dot = LinalgOp("dot", {"input", "tensor"});
  dot.composite = Dot;
  dot.doc = "torch.dot: inner product of two 1-d tensors of one length and dtype";
  MustAdd(r, std::move(dot));

  OpDef outer = LinalgOp("outer", {"input", "vec2"});
  outer.promote_from = 0;  // torch.outer is a broadcast multiply: operands meet at the result type
  outer.composite = Outer;
  outer.doc = "torch.outer: out[i, j] = input[i] * vec2[j]";
  MustAdd(r, std::move(outer));

  OpDef addmm = AddProductOp("addmm", {"input", "mat1", "mat2"}, Addmm);
  addmm.doc =
      "torch.addmm: beta * input + alpha * (mat1 @ mat2); input broadcasts to [n, m]; "
      "beta = 0 ignores input's values";
  MustAdd(r, std::move(addmm));

  OpDef baddbmm = AddProductOp("baddbmm", {"input", "batch1", "batch2"}, Baddbmm);
  baddbmm.doc =
      "torch.baddbmm: beta * input + alpha * bmm(batch1, batch2); input broadcasts to "
      "[b, n, m]; beta = 0 ignores input's values";
  MustAdd(r, std::move(baddbmm));

  OpDef trace = LinalgOp("trace", {"input"});
  trace.composite = Trace;
  trace.doc = "torch.trace: sum of the main diagonal of a 2-d tensor (rectangular allowed)";
  MustAdd(r, std::move(trace));

  OpDef diag = LinalgOp("diag", {"input"});
  diag.attrs = {IntAttr("diagonal", 0)};
  diag.composite = Diag;
  diag.doc =
      "torch.diag: a 1-d input becomes a square matrix with it on diagonal k; a 2-d input "
      "gives its k-th diagonal (k > 0 above the main diagonal, k < 0 below)";
  MustAdd(r, std::move(diag));

  OpDef diagonal = LinalgOp("diagonal", {"input"});
  diagonal.attrs = {IntAttr("offset", 0), IntAttr("dim1", 0), IntAttr("dim2", 1)};
  diagonal.infer = [](absl::Span<const TensorMeta> in,
                      const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(DiagonalSpec s, DiagonalOf(in[0].shape, a));
    return std::vector<TensorMeta>{{in[0].dtype, s.out}};
  };
  diagonal.backward = [](const GradContext& g) -> absl::StatusOr<Tensors> {
    AttrMap attrs = g.attrs.map();
    attrs["shape"] = g.inputs[0].shape();
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::diagonal_backward, {g.grad_outputs[0]}, attrs));
    return Tensors{gx};
  };
  diagonal.doc =
      "torch.diagonal: the diagonal of the (dim1, dim2) matrices at offset, appended as the "
      "last dim (a copy)";
  MustAdd(r, std::move(diagonal));

  // Zeros of `shape` with the input written on the diagonal `diagonal` would read from them.
  OpDef back = LinalgOp("diagonal_backward", {"grad"});
  back.internal = true;
  back.attrs = {RequiredIntsAttr("shape"), IntAttr("offset", 0), IntAttr("dim1", 0),
                IntAttr("dim2", 1)};
  back.infer = [](absl::Span<const TensorMeta> in,
                  const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    const Shape shape = a.GetInts("shape");
    auto n = CheckedNumElements(shape);
    if (!n.ok()) return WithMetadata(n.status(), {{"op", "diagonal_backward"}});
    ASSIGN_OR_RETURN(DiagonalSpec s, ResolveDiagonal("diagonal_backward", shape, a.GetInt("offset"),
                                                     a.GetInt("dim1"), a.GetInt("dim2")));
    if (s.out != in[0].shape) {
      return ShapeError("diagonal_backward",
                        absl::StrCat("a diagonal of shape ", ShapeToString(in[0].shape),
                                     " does not fit the diagonal of ", ShapeToString(shape),
                                     " (shape ", ShapeToString(s.out), ")"));
    }
    return std::vector<TensorMeta>{{in[0].dtype, shape}};
  };
  back.backward = [](const GradContext& g) -> absl::StatusOr<Tensors> {
    AttrMap attrs = g.attrs.map();
    attrs.erase("shape");
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::diagonal, {g.grad_outputs[0]}, attrs));
    return Tensors{gx};
  };
  MustAdd(r, std::move(back));

  RegisterLinalgEinsumOps(r);
}

}  // namespace tensord
