// layer_norm, native_batch_norm (batch_norm's kernel) and their gradients on a GPU
// device, as group kernels (gpu/norm_exprs.h). layer_norm: the input's gradient per row, the
// parameters' per column after a pass that writes each row's mean and rstd. batch_norm: every
// output a pass over the channels.
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/norm_exprs.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/reduction_kernels.h"
#include "server/core/status.h"

namespace tensord::gpu {

namespace {

// native_batch_norm writes y, then the mean and variance it used; its backward the three
// gradients, each a pass over the channels.
absl::Status RunBatchNorm(KernelCall& c, DeviceRuntime& device, bool backward) {
  const std::vector<Tensor> inputs(c.inputs.begin(), c.inputs.end());
  const bool training = c.attrs.GetBool("training");
  const double eps = c.attrs.GetFloat("eps");
  if (!backward) {
    const Tensor& x = inputs[0];
    RETURN_IF_ERROR(LaunchGroup(device, "batch_norm",
                                gpu::BatchNormPlan(x.rank(), training, eps, x.dtype()), inputs,
                                c.outputs[0], nullptr));
    for (int s = 0; s < 2; ++s) {
      RETURN_IF_ERROR(LaunchGroup(device, s == 0 ? "batch_norm_mean" : "batch_norm_var",
                                  gpu::BatchNormStatPlan(x.rank(), training, s == 1, x.dtype()),
                                  inputs, c.outputs[1 + s], nullptr));
    }
    return absl::OkStatus();
  }
  const Tensor& x = inputs[1];
  for (int part = 0; part < 3; ++part) {
    RETURN_IF_ERROR(LaunchGroup(device, absl::StrCat("batch_norm_grad_", part),
                                gpu::BatchNormGradPlan(x.rank(), training, eps, part, x.dtype()),
                                inputs, c.outputs[part], nullptr));
  }
  return absl::OkStatus();
}

absl::Status RunLayerNorm(KernelCall& c, DeviceRuntime& device, bool backward) {
  const std::vector<Tensor> inputs(c.inputs.begin(), c.inputs.end());
  const int64_t k = static_cast<int64_t>(c.attrs.GetInts("normalized_shape").size());
  const double eps = c.attrs.GetFloat("eps");
  if (!backward) {
    const Tensor& x = inputs[0];
    return LaunchGroup(
        device, "layer_norm",
        gpu::LayerNormPlan(x.rank(), k, static_cast<int>(inputs.size()), eps, x.dtype()), inputs,
        c.outputs[0], nullptr);
  }
  const Tensor& grad = inputs[0];
  const Tensor& x = inputs[1];
  const int64_t rank = x.rank();
  RETURN_IF_ERROR(
      LaunchGroup(device, "layer_norm_input_grad",
                  gpu::LayerNormInputGradPlan(rank, k, inputs.size() > 2, eps, x.dtype()), inputs,
                  c.outputs[0], nullptr));
  // Each row's statistics once, for the column sums of the parameters' gradients.
  const Shape rows(x.shape().begin(), x.shape().end() - k);
  Tensor stats[2];
  for (int s = 0; s < 2; ++s) {
    ASSIGN_OR_RETURN(stats[s], Tensor::EmptyOn(device.shared_from_this(), DType::kF64, rows,
                                               x.device(), c.account));
    RETURN_IF_ERROR(LaunchGroup(device, s == 0 ? "layer_norm_mean" : "layer_norm_rstd",
                                gpu::RowStatPlan(rank, k, s == 1, eps), {x}, stats[s], nullptr));
  }
  RETURN_IF_ERROR(LaunchGroup(device, "layer_norm_weight_grad",
                              gpu::LayerNormWeightGradPlan(rank, k, x.dtype()),
                              {x, grad, stats[0], stats[1]}, c.outputs[1], nullptr));
  return LaunchGroup(device, "layer_norm_bias_grad", gpu::LayerNormBiasGradPlan(rank, k, x.dtype()),
                     {grad}, c.outputs[2], nullptr);
}

}  // namespace

void RegisterNormKernels(GpuKernelTable& t) {
  t.Add("native_batch_norm", KernelOf(RunBatchNorm, false));
  t.Add("native_batch_norm_backward", KernelOf(RunBatchNorm, true));
  t.Add("layer_norm", KernelOf(RunLayerNorm, false));
  t.Add("layer_norm_backward", KernelOf(RunLayerNorm, true));
}

}  // namespace tensord::gpu
