// Linear algebra: matmul (torch.matmul's 1-d promotions and batch broadcasting), mm, bmm and
// linear. Their gradients are products with one operand transposed; the internal batch_matmul
// op reads an operand transposed in place, so backward materializes no transposes. Gradients of
// broadcast batch dims come back at the broadcast shape and the engine sums them.
#include "absl/strings/str_cat.h"
#include "server/ops/linalg_products.h"
#include "server/ops/nn_geometry.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {
using namespace ops;

absl::StatusOr<Tensor> BatchMatmul(GradOps& o, const Tensor& a, const Tensor& b, bool ta, bool tb) {
  return o.Op(opname::batch_matmul, {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}});
}

Shape Concat(Shape a, std::initializer_list<int64_t> tail) {
  a.insert(a.end(), tail);
  return a;
}

// Gradients of out = matmul(a, b) for matmul, mm and bmm.
absl::StatusOr<std::vector<Tensor>> MatmulBackward(const GradContext& g) {
  GradOps o(g.run);
  const Tensor& a = g.inputs[0];
  const Tensor& b = g.inputs[1];
  ASSIGN_OR_RETURN(nn::MatmulPlan p, nn::PlanMatmul("matmul", a.shape(), b.shape()));
  // Work on the promoted operands: a as [..., n, k], b as [..., k, m], grad as [batch, n, m].
  Tensor ap = a, bp = b;
  if (a.rank() == 1) {
    ASSIGN_OR_RETURN(ap, o.Reshape(a, {1, p.k}));
  }
  if (b.rank() == 1) {
    ASSIGN_OR_RETURN(bp, o.Reshape(b, {p.k, 1}));
  }
  ASSIGN_OR_RETURN(Tensor gp, o.Reshape(g.grad_outputs[0], Concat(p.batch, {p.n, p.m})));
  std::vector<Tensor> grads(2);
  if (g.needs_input_grad[0]) {
    // [batch, n, k]; a 1-d a's extra dims are summed away by the engine.
    ASSIGN_OR_RETURN(grads[0], BatchMatmul(o, gp, bp, false, true));
  }
  if (g.needs_input_grad[1]) {
    Tensor gb;
    if (bp.rank() == 2 && !p.batch.empty()) {
      // b is shared by every batch entry: fold the batch into the rows, one GEMM, no sum.
      const int64_t rows = NumElements(p.batch) * p.n;
      ASSIGN_OR_RETURN(Tensor a2, o.Reshape(ap, {rows, p.k}));
      ASSIGN_OR_RETURN(Tensor g2, o.Reshape(gp, {rows, p.m}));
      ASSIGN_OR_RETURN(gb, BatchMatmul(o, a2, g2, true, false));
    } else {
      ASSIGN_OR_RETURN(gb, BatchMatmul(o, ap, gp, true, false));
    }
    if (b.rank() == 1) {
      // Drop the trailing 1 the promotion added; the engine sums the batch.
      Shape s(gb.shape().begin(), gb.shape().end() - 1);
      ASSIGN_OR_RETURN(gb, o.Reshape(gb, s));
    }
    grads[1] = gb;
  }
  return grads;
}

OpDef Product(const std::string& name, std::vector<std::string> inputs) {
  OpDef d = NewOp(name, "linalg", std::move(inputs), kFloat, Marking::kDifferentiable);
  d.compute_bound = true;
  return d;
}

InferFn MatmulInfer(const std::string& op, int rank_a, int rank_b) {
  return [op, rank_a, rank_b](absl::Span<const TensorMeta> in,
                              const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(SameDtype(op, in));
    if ((rank_a && static_cast<int>(in[0].shape.size()) != rank_a) ||
        (rank_b && static_cast<int>(in[1].shape.size()) != rank_b)) {
      return nn::ShapeErrorWithShapes(op, in[0].shape, in[1].shape,
                                      absl::StrCat("are not both ", rank_a, "-d"));
    }
    if (op == "bmm" && in[0].shape[0] != in[1].shape[0]) {
      return nn::ShapeErrorWithShapes(op, in[0].shape, in[1].shape, "have different batch sizes");
    }
    ASSIGN_OR_RETURN(nn::MatmulPlan p, nn::PlanMatmul(op, in[0].shape, in[1].shape));
    return std::vector<TensorMeta>{{in[0].dtype, p.out}};
  };
}

absl::StatusOr<std::vector<TensorMeta>> LinearInfer(absl::Span<const TensorMeta> in, const Attrs&) {
  RETURN_IF_ERROR(SameDtype("linear", in));
  const Shape& x = in[0].shape;
  const Shape& w = in[1].shape;
  if (x.empty() || w.empty() || w.size() > 2) {
    return nn::ShapeErrorWithShapes("linear", x, w,
                                    "are invalid: input needs at least 1 dim and weight 1 or 2");
  }
  if (x.back() != w.back()) {
    return nn::ShapeErrorWithShapes(
        "linear", x, w,
        absl::StrCat("cannot be multiplied (in_features ", x.back(), " vs ", w.back(), ")"));
  }
  Shape out(x.begin(), x.end() - 1);
  if (w.size() == 2) out.push_back(w[0]);
  if (in.size() == 3) {
    // The bias is added in place, as torch's addmm / add_: it must not grow the output.
    auto b = BroadcastShapes(out, in[2].shape);
    if (!b.ok() || *b != out) {
      return ShapeError(
          "linear", absl::StrCat("bias of shape ", ShapeToString(in[2].shape),
                                 " does not broadcast to the output shape ", ShapeToString(out)));
    }
  }
  return std::vector<TensorMeta>{{in[0].dtype, out}};
}

absl::StatusOr<std::vector<Tensor>> LinearBackward(const GradContext& g) {
  GradOps o(g.run);
  const Tensor& x = g.inputs[0];
  const Tensor& w = g.inputs[1];
  const int64_t in = x.shape().back();
  const int64_t rows = NumElements(absl::MakeConstSpan(x.shape()).first(x.rank() - 1));
  const int64_t out = w.rank() == 2 ? w.dim(0) : 1;
  ASSIGN_OR_RETURN(Tensor g2, o.Reshape(g.grad_outputs[0], {rows, out}));
  std::vector<Tensor> grads(g.inputs.size());
  if (g.needs_input_grad[0]) {
    ASSIGN_OR_RETURN(Tensor w2, o.Reshape(w, {out, in}));
    ASSIGN_OR_RETURN(Tensor gx, BatchMatmul(o, g2, w2, false, false));
    ASSIGN_OR_RETURN(grads[0], o.Reshape(gx, x.shape()));
  }
  if (g.needs_input_grad[1]) {
    ASSIGN_OR_RETURN(Tensor x2, o.Reshape(x, {rows, in}));
    ASSIGN_OR_RETURN(Tensor gw, BatchMatmul(o, g2, x2, true, false));
    ASSIGN_OR_RETURN(grads[1], o.Reshape(gw, w.shape()));
  }
  // The bias gradient is the output gradient summed over broadcast dims, done by the engine.
  if (g.inputs.size() == 3 && g.needs_input_grad[2]) grads[2] = g.grad_outputs[0];
  return grads;
}

}  // namespace

void RegisterLinalgOps(OpRegistry& r) {
  OpDef matmul = Product("matmul", {"input", "other"});
  matmul.infer = MatmulInfer("matmul", 0, 0);
  matmul.backward = MatmulBackward;
  matmul.doc = "torch.matmul: dot, matrix-vector, matrix and batched products with broadcasting";
  MustAdd(r, std::move(matmul));

  OpDef mm = Product("mm", {"input", "mat2"});
  mm.infer = MatmulInfer("mm", 2, 2);
  mm.backward = MatmulBackward;
  mm.doc = "torch.mm: product of two matrices";
  MustAdd(r, std::move(mm));

  OpDef bmm = Product("bmm", {"input", "mat2"});
  bmm.infer = MatmulInfer("bmm", 3, 3);
  bmm.backward = MatmulBackward;
  bmm.doc = "torch.bmm: batched product of [b, n, k] and [b, k, m]";
  MustAdd(r, std::move(bmm));

  OpDef linear = Product("linear", {"input", "weight", "bias"});
  linear.min_inputs = 2;
  linear.infer = LinearInfer;
  linear.backward = LinearBackward;
  linear.doc = "torch.nn.functional.linear: input @ weight^T + bias";
  MustAdd(r, std::move(linear));

  // Gradient helper: op(a) @ op(b) with op an optional transpose of the two innermost dims.
  OpDef bm = Product("batch_matmul", {"a", "b"});
  bm.internal = true;
  bm.marking = Marking::kUnmarked;
  bm.attrs = {BoolAttr("transpose_a", false), BoolAttr("transpose_b", false)};
  bm.infer = [](absl::Span<const TensorMeta> in,
                const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(SameDtype("batch_matmul", in));
    ASSIGN_OR_RETURN(nn::MatmulPlan p,
                     nn::PlanBatchMatmul("batch_matmul", in[0].shape, in[1].shape,
                                         a.GetBool("transpose_a"), a.GetBool("transpose_b")));
    return std::vector<TensorMeta>{{in[0].dtype, p.out}};
  };
  MustAdd(r, std::move(bm));

  RegisterLinalgProductOps(r);
}

}  // namespace tensord
