// The pointwise parts of the losses (l1, binary cross entropy with and without logits, smooth
// l1, huber, kl_div) and their gradients on a GPU device: one elementwise map per output,
// computed in double (gpu/loss_exprs.h), so they need fp64.
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/loss_exprs.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/core/status.h"
#include "server/ops/reduction.h"

namespace tensord::gpu {

namespace {

absl::Status RunPointwiseLoss(KernelCall& c, DeviceRuntime& device, const PointwiseLossForm* form) {
  const std::string& op = c.op.name;
  // binary_cross_entropy's probabilities are checked before anything is written, as on the CPU
  // (one synchronisation per call).
  if (form->checks_probabilities) {
    ASSIGN_OR_RETURN(Tensor host, ReadToHost(c.inputs[0], device));
    RETURN_IF_ERROR(CheckProbabilities(host));
  }
  const std::vector<gpu::ElementwiseExpr> exprs =
      form->exprs(c.attrs, static_cast<int>(c.inputs.size()));
  if (exprs.size() != c.outputs.size()) {
    return Error(Reason::kInternal,
                 absl::StrCat(device.name(), ": ", op, " was given a call it refuses when planned"),
                 {{"op", op}, {"backend", device.kind()}, {"device", device.name()}});
  }
  std::vector<Shape> shapes;
  for (const Tensor& t : c.inputs) shapes.push_back(t.shape());
  const std::vector<Tensor> inputs(c.inputs.begin(), c.inputs.end());
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    const gpu::Geometry g = gpu::BroadcastGeometry(c.outputs[k].shape(), shapes);
    RETURN_IF_ERROR(LaunchMap(device, absl::StrCat(op, "_", k), exprs[k], DType::kF64, inputs, g,
                              c.outputs[k]));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterLossKernels(GpuKernelTable& t) {
  for (const PointwiseLossForm& form : PointwiseLosses()) {
    GpuKernel k = KernelOf(RunPointwiseLoss, &form);
    // One expression per output, for the call's number of operands.
    k.supports = [&form](const KernelQuery& q, const DeviceRuntime&) {
      return form.exprs(*q.attrs, static_cast<int>(q.inputs.size())).size() == q.outputs.size();
    };
    t.Add(form.op, std::move(k));
  }
}

}  // namespace tensord::gpu
