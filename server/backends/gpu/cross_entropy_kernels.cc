// cross_entropy's class-index loss on a GPU device (cross_entropy_nll and its gradient):
// the targets are read to the host first, because a target out of range is an error the
// call must report before it writes anything; the losses and gradients are group kernels.
#include <vector>

#include "server/backends/gpu/codegen/loss_exprs.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/backends/gpu/reduction_kernels.h"
#include "server/core/status.h"
#include "server/ops/reduction.h"

namespace tensord::gpu {
namespace {

// The values of `t` (targets, class weights), read from the device.
absl::StatusOr<std::vector<double>> ReadValues(const Tensor& t, DeviceRuntime& device) {
  ASSIGN_OR_RETURN(Tensor host, ReadToHost(t, device));
  return host.ToDoubles();
}

// Checks every target and returns the summed weight of those not ignored (the mean's
// divisor), as the CPU kernel does.
absl::StatusOr<double> TotalWeight(const KernelCall& c, const Tensor& log_probs,
                                   const Tensor& target, const Tensor* weight,
                                   DeviceRuntime& device) {
  const int64_t classes = log_probs.shape()[log_probs.rank() == 1 ? 0 : 1];
  const int64_t ignore = c.attrs.GetInt("ignore_index");
  ASSIGN_OR_RETURN(std::vector<double> targets, ReadValues(target, device));
  std::vector<double> weights;
  if (weight != nullptr) {
    ASSIGN_OR_RETURN(weights, ReadValues(*weight, device));
  }
  double total = 0;
  for (double v : targets) {
    const int64_t t = static_cast<int64_t>(v);
    RETURN_IF_ERROR(CheckClassIndex(c.attrs.GetString("loss"), t, classes, ignore));
    if (t != ignore) total += weight != nullptr ? weights[t] : 1.0;
  }
  return total;
}

absl::Status Forward(KernelCall& c, DeviceRuntime& device) {
  const Tensor& log_probs = c.inputs[0];
  const bool weighted = c.inputs.size() > 2;
  ASSIGN_OR_RETURN(double total_weight, TotalWeight(c, log_probs, c.inputs[1],
                                                    weighted ? &c.inputs[2] : nullptr, device));
  const std::vector<Tensor> inputs(c.inputs.begin(), c.inputs.end());
  const gpu::GroupPlan plan = gpu::NllLossPlan(c.attrs, log_probs.rank(), weighted);
  const std::string reduction = c.attrs.GetString("reduction");
  if (reduction == "none")
    return LaunchGroup(device, c.op.name, plan, inputs, c.outputs[0], nullptr);
  // Per-sample losses in double, then their sum (over the total weight for the mean).
  ASSIGN_OR_RETURN(Tensor losses, Tensor::EmptyOn(device.shared_from_this(), DType::kF64,
                                                  c.inputs[1].shape(), device.name(), c.account));
  RETURN_IF_ERROR(LaunchGroup(device, c.op.name, plan, inputs, losses, nullptr));
  const gpu::GroupPlan sum =
      gpu::ScaledSumPlan(losses.rank(), reduction == "sum" ? 1.0 : total_weight);
  return LaunchGroup(device, "nll_total", sum, {losses}, c.outputs[0], nullptr);
}

absl::Status Backward(KernelCall& c, DeviceRuntime& device) {
  const Tensor& grad = c.inputs[0];
  const Tensor& log_probs = c.inputs[1];
  const bool weighted = c.inputs.size() > 3;
  ASSIGN_OR_RETURN(double total_weight, TotalWeight(c, log_probs, c.inputs[2],
                                                    weighted ? &c.inputs[3] : nullptr, device));
  gpu::GroupPlan plan = gpu::NllBackwardPlan(c.attrs, log_probs.rank(), weighted);
  const std::string reduction = c.attrs.GetString("reduction");
  if (reduction != "none") {
    // A reduced loss has one gradient value: its scale is a kernel argument.
    ASSIGN_OR_RETURN(std::vector<double> g, ReadValues(grad, device));
    if (g.size() != 1)
      return Error(Reason::kInternal, "cross_entropy_nll_backward: grad is not 0-d");
    plan.scalar = reduction == "mean" ? g[0] / total_weight : g[0];
  }
  const std::vector<Tensor> inputs(c.inputs.begin(), c.inputs.end());
  return LaunchGroup(device, c.op.name, plan, inputs, c.outputs[0], nullptr);
}

}  // namespace

void RegisterCrossEntropyKernels(GpuKernelTable& t) {
  t.Add("cross_entropy_nll", KernelOf(Forward));
  t.Add("cross_entropy_nll_backward", KernelOf(Backward));
}

}  // namespace tensord::gpu
