// Elementwise ops: binary arithmetic with broadcasting and type promotion, comparisons,
// logical ops, where, unary math. Gradients of broadcast inputs are summed back to the input
// shape by the autodiff engine, so rules here work at the broadcast shape.
#include "server/ops/op_helpers.h"

namespace tensord {
namespace {
using namespace ops;

OpDef Binary(const std::string& name, DTypeSet dtypes, BackwardFn backward) {
  OpDef d;
  d.name = name;
  d.category = "elementwise";
  d.min_inputs = d.max_inputs = 2;
  d.input_names = {"input", "other"};
  d.dtypes = dtypes;
  d.promote_from = 0;
  d.marking = Marking::kDifferentiable;
  d.infer = Broadcast();
  d.backward = std::move(backward);
  return d;
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  OpDef add =
      Binary("add", kFloatInt, [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
        GradOps o(g.run);
        const double alpha = g.attrs.GetFloat("alpha", 1.0);
        Tensor gb = g.grad_outputs[0];
        if (alpha != 1.0) {
          ASSIGN_OR_RETURN(gb, o.Scale(gb, alpha));
        }
        return std::vector<Tensor>{g.grad_outputs[0], gb};
      });
  add.attrs = {FloatAttr("alpha", 1.0)};
  MustAdd(r, std::move(add));

  MustAdd(r,
          Binary("mul", kFloatInt, [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
            GradOps o(g.run);
            std::vector<Tensor> out(2);
            if (g.needs_input_grad[0]) {
              ASSIGN_OR_RETURN(out[0], o.Mul(g.grad_outputs[0], g.inputs[1]));
            }
            if (g.needs_input_grad[1]) {
              ASSIGN_OR_RETURN(out[1], o.Mul(g.grad_outputs[0], g.inputs[0]));
            }
            return out;
          }));
}

}  // namespace tensord
