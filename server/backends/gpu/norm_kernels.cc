// layer_norm, native_batch_norm (batch_norm's kernel) and their gradients on a GPU
// device, as group kernels (gpu/norm_exprs.h) and maps. layer_norm: the input's gradient per
// row, the parameters' per column after a pass that writes each row's mean and rstd.
// batch_norm: the statistics (or the parameters' gradients) a group kernel each, then the
// output from them (a map forward, a group kernel backward).
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/norm_exprs.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/backends/gpu/reduction_kernels.h"
#include "server/core/status.h"

namespace tensord::gpu {

namespace {

// A per-channel temporary in the device's WIDE type: statistics and sums kept at the precision
// the kernels computed them in between passes.
absl::StatusOr<Tensor> Wide(KernelCall& c, DeviceRuntime& device, const Tensor& like) {
  return Tensor::EmptyOn(device.shared_from_this(), device.has_fp64() ? DType::kF64 : DType::kF32,
                         like.shape(), like.device(), c.account);
}

// `from` cast into `to` (same shape).
absl::Status CastInto(DeviceRuntime& device, const Tensor& from, Tensor& to) {
  return Copy(device, "cast", from, ContiguousStrides(from.shape()), to);
}

gpu::ElementwiseExpr Expr(int arity, std::string expr, std::vector<double> scalars = {}) {
  gpu::ElementwiseExpr e;
  e.arity = arity;
  e.expr = std::move(expr);
  e.scalars = std::move(scalars);
  return e;
}

// y = x * scale + shift, each channel's scale = weight / sqrt(var + eps) and shift = bias -
// mean * scale made first in WIDE, then y in WIDE by one work item per element: a map over the
// whole tensor, not a work group per channel. `in`: x, weight, bias, mean, var.
absl::Status Normalize(KernelCall& c, DeviceRuntime& device, const std::vector<Tensor>& in,
                       double eps, Tensor& y) {
  const Tensor& x = in[0];
  ASSIGN_OR_RETURN(Tensor scale, Wide(c, device, in[1]));  // shaped as the weight: [C]
  ASSIGN_OR_RETURN(Tensor shift, Wide(c, device, in[1]));
  const DType wide = scale.dtype();
  const Shape channels = scale.shape();
  const gpu::Geometry per_channel =
      gpu::BroadcastGeometry(channels, {channels, channels, channels});
  RETURN_IF_ERROR(LaunchMap(device, "batch_norm_scale", Expr(2, "a / sqrt(b + s0)", {eps}), wide,
                            {in[1], in[4]}, per_channel, scale));
  RETURN_IF_ERROR(LaunchMap(device, "batch_norm_shift", Expr(3, "b - c * a"), wide,
                            {scale, in[2], in[3]}, per_channel, shift));
  Shape view(x.rank(), 1);
  view[1] = x.shape()[1];
  return LaunchMap(device, "batch_norm_apply", Expr(3, "a * b + c"), wide,
                   {x, scale.Reshaped(view), shift.Reshaped(view)},
                   gpu::BroadcastGeometry(x.shape(), {x.shape(), view, view}), y);
}

// native_batch_norm: in training the batch's mean, then its variance about it (a pass each),
// then y from them (a map); the mean and variance go out as the outputs 1 and 2. In
// evaluation y from the running statistics, which go out as they are. Its backward: the
// weight's and the bias's gradients (a pass each), then the input's from them (a pass).
absl::Status RunBatchNorm(KernelCall& c, DeviceRuntime& device, bool backward) {
  const std::vector<Tensor> inputs(c.inputs.begin(), c.inputs.end());
  const bool training = c.attrs.GetBool("training");
  const double eps = c.attrs.GetFloat("eps");
  if (!backward) {
    const Tensor& x = inputs[0];
    if (!training) {
      RETURN_IF_ERROR(CastInto(device, inputs[3], c.outputs[1]));
      RETURN_IF_ERROR(CastInto(device, inputs[4], c.outputs[2]));
      return Normalize(c, device, inputs, eps, c.outputs[0]);
    }
    ASSIGN_OR_RETURN(Tensor mean, Wide(c, device, c.outputs[1]));
    ASSIGN_OR_RETURN(Tensor var, Wide(c, device, c.outputs[2]));
    RETURN_IF_ERROR(LaunchGroup(device, "batch_norm_mean",
                                gpu::BatchNormStatPlan(x.rank(), false, x.dtype()), {x}, mean,
                                nullptr));
    RETURN_IF_ERROR(LaunchGroup(device, "batch_norm_var",
                                gpu::BatchNormStatPlan(x.rank(), true, x.dtype()), {x, mean}, var,
                                nullptr));
    RETURN_IF_ERROR(Normalize(c, device, {x, inputs[1], inputs[2], mean, var}, eps, c.outputs[0]));
    RETURN_IF_ERROR(CastInto(device, mean, c.outputs[1]));
    return CastInto(device, var, c.outputs[2]);
  }
  const Tensor& x = inputs[1];
  Tensor sums[2];
  for (int part : {1, 2}) {
    ASSIGN_OR_RETURN(sums[part - 1], Wide(c, device, c.outputs[part]));
    RETURN_IF_ERROR(LaunchGroup(device, absl::StrCat("batch_norm_grad_", part),
                                gpu::BatchNormGradPlan(x.rank(), training, eps, part, x.dtype()),
                                inputs, sums[part - 1], nullptr));
    RETURN_IF_ERROR(CastInto(device, sums[part - 1], c.outputs[part]));
  }
  return LaunchGroup(
      device, "batch_norm_grad_0", gpu::BatchNormGradPlan(x.rank(), training, eps, 0, x.dtype()),
      {inputs[0], x, inputs[2], inputs[3], inputs[4], sums[0], sums[1]}, c.outputs[0], nullptr);
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
    const std::vector<Tensor> in =
        s == 0 ? std::vector<Tensor>{x} : std::vector<Tensor>{x, stats[0]};
    RETURN_IF_ERROR(LaunchGroup(device, s == 0 ? "layer_norm_mean" : "layer_norm_rstd",
                                gpu::RowStatPlan(rank, k, s == 1, eps), in, stats[s], nullptr));
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
