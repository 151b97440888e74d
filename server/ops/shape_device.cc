// Ops about where a value lives rather than what it is: to_device (a differentiable copy to a
// named device) and assign, the one in-place op (optimizer updates write through it).
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/shape_ops.h"

namespace tensord {

void RegisterShapeDeviceOps(OpRegistry& r) {
  OpDef to_device = ops::NewOp("to_device", "shape", {"input"}, kAll, Marking::kDifferentiable);
  to_device.attrs = {{"device", AttrType::kString, {}, true}};
  // Between devices, so neither backend alone runs it: the dispatcher allocates the output on
  // the destination and copies (DEVICE_NOT_FOUND for a device the server lacks).
  to_device.device_move = true;
  to_device.infer = ops::SameAs(0);
  to_device.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    ops::GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::to_device, {g.grad_outputs[0]},
                                     {{"device", g.inputs[0].device()}}));
    return std::vector<Tensor>{gx};
  };
  to_device.doc = "A copy of the input on the named device (see ListDevices).";
  MustAdd(r, std::move(to_device));

  OpDef assign =
      ops::NewOp("assign", "shape", {"target", "value"}, kAll, Marking::kNonDifferentiable);
  assign.in_place = true;
  // The output is the target itself: same storage, so no output is allocated.
  assign.view = true;
  assign.infer = [](absl::Span<const TensorMeta> in,
                    const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    auto s = BroadcastShapes(in[1].shape, in[0].shape);
    if (!s.ok() || *s != in[0].shape) {
      return Error(
          Reason::kShapeMismatch,
          absl::StrCat("assign: value of shape ", ShapeToString(in[1].shape),
                       " cannot be broadcast to the target's shape ", ShapeToString(in[0].shape)),
          {{"op", "assign"},
           {"shape", ShapeToString(in[1].shape)},
           {"target_shape", ShapeToString(in[0].shape)}});
    }
    return std::vector<TensorMeta>{in[0]};
  };
  assign.doc =
      "Writes value (broadcast to the target's shape, cast to its dtype) into target's storage "
      "and bumps its version; saved tensors sharing that storage then refuse backward.";
  MustAdd(r, std::move(assign));
}

}  // namespace tensord
