// Statistical reductions over a dim list: var, std (with Bessel-style correction) and
// logsumexp (computed stably). Their gradients are internal ops with their own kernels.
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/reduction.h"

namespace tensord {

// Optional without a default in the spec: a filled-in correction could not be told apart from
// one given together with `unbiased`.
absl::StatusOr<double> VarCorrection(const std::string& op, const Attrs& a) {
  if (a.Has("unbiased")) {
    if (a.Has("correction")) {
      return ops::AttrError(op, "unbiased", "cannot be given together with 'correction'");
    }
    return a.GetBool("unbiased") ? 1.0 : 0.0;
  }
  return a.Has("correction") ? a.GetFloat("correction") : 1.0;
}

namespace {
using namespace ops;

OpDef FloatReduction(const std::string& name) {
  OpDef d = NewOp(name, "reduction", {"input"}, kFloat, Marking::kDifferentiable);
  d.attrs = {IntsAttr("dim"), BoolAttr("keepdim", false)};
  d.infer = [name](absl::Span<const TensorMeta> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(auto dims, ReductionDims(name, a, in[0].shape.size()));
    return std::vector<TensorMeta>{
        {in[0].dtype, ReducedShape(in[0].shape, dims, a.GetBool("keepdim"))}};
  };
  return d;
}

OpDef VarStd(const std::string& name) {
  OpDef d = FloatReduction(name);
  d.attrs.push_back(OptionalFloatAttr("correction"));
  d.attrs.push_back({"unbiased", AttrType::kBool, {}});
  InferFn base = d.infer;
  d.infer = [name, base](absl::Span<const TensorMeta> in,
                         const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(VarCorrection(name, a).status());
    return base(in, a);
  };
  const bool is_std = name == "std";
  d.backward = [name, is_std](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(double correction, VarCorrection(name, g.attrs));
    AttrMap attrs = {
        {"keepdim", g.attrs.GetBool("keepdim")}, {"correction", correction}, {"std", is_std}};
    if (g.attrs.Has("dim")) attrs["dim"] = g.attrs.GetInts("dim");
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::var_backward,
                                     {g.grad_outputs[0], g.inputs[0], g.outputs[0]}, attrs));
    return std::vector<Tensor>{gx};
  };
  return d;
}

// Internal gradient ops of the statistics: (grad, input, result) -> grad of input.
OpDef StatBackward(const std::string& name, std::vector<AttrSpec> extra) {
  OpDef d = NewInternalOp(name, "reduction", {"grad", "input", "result"}, kFloat);
  d.attrs = {IntsAttr("dim"), BoolAttr("keepdim", false)};
  for (AttrSpec& s : extra) d.attrs.push_back(std::move(s));
  d.infer = [name](absl::Span<const TensorMeta> in,
                   const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    if (in[0].dtype != in[1].dtype || in[2].dtype != in[1].dtype) {
      return DtypeError(name, "grad, input and result must share one dtype");
    }
    return std::vector<TensorMeta>{{in[0].dtype, in[1].shape}};
  };
  return d;
}

}  // namespace

void RegisterStatisticOps(OpRegistry& r) {
  MustAdd(r, VarStd("var"));
  MustAdd(r, VarStd("std"));

  OpDef lse = FloatReduction("logsumexp");
  lse.doc = "log(sum(exp(x))) over dim, computed without overflow";
  lse.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(
        Tensor gx, o.Op(opname::logsumexp_backward, {g.grad_outputs[0], g.inputs[0], g.outputs[0]},
                        g.attrs.map()));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(lse));

  MustAdd(r, StatBackward("var_backward", {FloatAttr("correction", 1.0), BoolAttr("std", false)}));
  MustAdd(r, StatBackward("logsumexp_backward", {}));
}

}  // namespace tensord
