// Products and scans: prod over one dim or all, cumsum and cumprod along a dim.
// Integer and bool inputs accumulate in i64 unless a dtype is given, as in PyTorch. The
// gradients of prod and cumprod are internal ops built from exclusive prefix and suffix
// products, never a division by the input, so they are right with one or several zeros.
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/reduction.h"

namespace tensord {
namespace {
using namespace ops;

// torch.prod/cumsum/cumprod: the dtype attribute (the input is cast to it first), else floats
// keep their dtype and integers and bool widen to i64.
DType AccumulatingDType(const TensorMeta& in, const Attrs& a) {
  return a.GetDType("dtype").value_or(IsFloat(in.dtype) ? in.dtype : DType::kI64);
}

// `x` in the dtype of the gradient flowing back, when a dtype attribute changed it (the engine
// casts the result back to the input's dtype).
absl::StatusOr<Tensor> InGradDType(GradOps& o, const Tensor& x, const Tensor& grad) {
  if (x.dtype() == grad.dtype()) return x;
  return o.Op(opname::to_dtype, {x}, {{"dtype", std::string(DTypeName(grad.dtype()))}});
}

OpDef Prod() {
  OpDef d = NewOp("prod", "reduction", {"input"}, kAll, Marking::kDifferentiable);
  d.attrs = {OptionalIntAttr("dim"), BoolAttr("keepdim", false), DTypeAttr("dtype")};
  d.doc =
      "product over dim (one int), or of every element (a 0-d result; keepdim applies only "
      "with dim); an empty product is 1";
  d.infer = [](absl::Span<const TensorMeta> in,
               const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(auto dims, SingleDimOrAll("prod", a, in[0].shape.size()));
    const bool keepdim = a.Has("dim") && a.GetBool("keepdim");
    return std::vector<TensorMeta>{
        {AccumulatingDType(in[0], a), ReducedShape(in[0].shape, dims, keepdim)}};
  };
  d.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor x, InGradDType(o, g.inputs[0], g.grad_outputs[0]));
    AttrMap attrs;
    if (g.attrs.Has("dim")) attrs["dim"] = g.attrs.GetInt("dim");
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::prod_backward, {g.grad_outputs[0], x}, attrs));
    return std::vector<Tensor>{gx};
  };
  return d;
}

// cumsum and cumprod: an output of the input's shape along a required dim.
OpDef Scan(const std::string& name) {
  OpDef d = NewOp(name, "reduction", {"input"}, kAll, Marking::kDifferentiable);
  d.attrs = {RequiredIntAttr("dim"), DTypeAttr("dtype")};
  d.infer = [name](absl::Span<const TensorMeta> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(NormalizeDimFor(name, a.GetInt("dim"), in[0].shape.size()).status());
    return std::vector<TensorMeta>{{AccumulatingDType(in[0], a), in[0].shape}};
  };
  return d;
}

// Internal gradient ops: (grad, [input]) -> grad of input, in the gradient's dtype.
OpDef ScanBackward(const std::string& name, int inputs, AttrSpec dim) {
  OpDef d = NewInternalOp(name, "reduction", {"grad", "input"}, kFloat);
  d.min_inputs = d.max_inputs = inputs;
  d.input_names.resize(inputs);
  d.attrs = {std::move(dim)};
  d.infer = [name](absl::Span<const TensorMeta> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    const TensorMeta& x = in.back();
    if (in[0].dtype != x.dtype) {
      return DtypeError(name, "grad and input must share one dtype");
    }
    RETURN_IF_ERROR(SingleDimOrAll(name, a, x.shape.size()).status());
    return std::vector<TensorMeta>{{in[0].dtype, x.shape}};
  };
  return d;
}

}  // namespace

void RegisterProductScanOps(OpRegistry& r) {
  MustAdd(r, Prod());

  OpDef cumsum = Scan("cumsum");
  cumsum.doc = "running sum along dim";
  cumsum.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::cumsum_backward, {g.grad_outputs[0]},
                                     {{"dim", g.attrs.GetInt("dim")}}));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(cumsum));

  OpDef cumprod = Scan("cumprod");
  cumprod.doc = "running product along dim";
  cumprod.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor x, InGradDType(o, g.inputs[0], g.grad_outputs[0]));
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::cumprod_backward, {g.grad_outputs[0], x},
                                     {{"dim", g.attrs.GetInt("dim")}}));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(cumprod));

  // prod_backward: d prod / d x_i = product of the other elements of x_i's group.
  MustAdd(r, ScanBackward("prod_backward", 2, OptionalIntAttr("dim")));
  // cumsum_backward: the reversed running sum of the gradient.
  MustAdd(r, ScanBackward("cumsum_backward", 1, RequiredIntAttr("dim")));
  MustAdd(r, ScanBackward("cumprod_backward", 2, RequiredIntAttr("dim")));
}

}  // namespace tensord
