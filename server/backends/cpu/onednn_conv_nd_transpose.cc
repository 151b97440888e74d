// oneDNN kernels of the f32 3-d and transposed convolutions: conv3d and conv_transpose2d, each with
// its input and weight gradients. All six run oneDNN's convolution primitives (forward, backward
// data, backward weights) in the roles of a convolution from `x` to `y`: a transposed
// convolution is the adjoint of the convolution with the same attributes, and PyTorch's
// transposed weight [C_in, C_out/groups, *k] is that convolution's weight [O, C/groups, *k]
// as it is, so no weight reorder is needed (oneDNN's deconvolution runs the same kernels).
// Like conv2d's kernels, the primitives choose blocked layouts and operands are reordered
// around the call. Calls oneDNN cannot reproduce exactly (empty tensors, an output_padding of
// at least the stride) are handed on to the loop kernels.
#include "server/backends/cpu/onednn_conv.h"

namespace tensord::cpu::onednn {
namespace {

// out[n, c, ...] += b[c].
void AddBias(Tensor& out, const Tensor& b, int spatial) {
  const Shape& s = out.shape();
  const size_t c_dim = s.size() - static_cast<size_t>(spatial) - 1;
  int64_t plane = 1;
  for (size_t d = c_dim + 1; d < s.size(); ++d) plane *= s[d];
  float* o = out.data<float>();
  const float* bias = b.data<float>();
  for (int64_t i = 0, n = out.numel(); i < n; ++i) o[i] += bias[(i / plane) % s[c_dim]];
}

absl::Status Conv3d(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 3, false));
  const bool bias = c.inputs.size() == 3;
  auto s = MakeConvSetup(c.inputs[0].shape(), c.inputs[1].shape(), c.outputs[0].shape(), p, bias);
  if (!s) return HandOn(c, "onednn_" + c.op.name);
  RunConvForward(*s, c.inputs[0], c.inputs[1], bias ? &c.inputs[2] : nullptr, c.outputs[0]);
  return absl::OkStatus();
}

absl::Status Conv3dBackwardInput(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 3, false));
  auto s = MakeConvSetup(c.outputs[0].shape(), c.inputs[1].shape(), c.inputs[0].shape(), p, false);
  if (!s) return HandOn(c, "onednn_" + c.op.name);
  RunConvBackwardData(*s, c.inputs[0], c.inputs[1], c.outputs[0]);
  return absl::OkStatus();
}

absl::Status Conv3dBackwardWeight(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 3, false));
  auto s = MakeConvSetup(c.inputs[1].shape(), c.outputs[0].shape(), c.inputs[0].shape(), p, false);
  if (!s) return HandOn(c, "onednn_" + c.op.name);
  RunConvBackwardWeights(*s, c.inputs[0], c.inputs[1], c.outputs[0]);
  return absl::OkStatus();
}

// The transposed convolution's output is the convolution's x, its input the convolution's y.
absl::Status ConvTranspose2d(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 2, true));
  auto s = MakeConvSetup(c.outputs[0].shape(), c.inputs[1].shape(), c.inputs[0].shape(), p, false);
  if (!s) return HandOn(c, "onednn_" + c.op.name);
  RunConvBackwardData(*s, c.inputs[0], c.inputs[1], c.outputs[0]);
  if (c.inputs.size() == 3) AddBias(c.outputs[0], c.inputs[2], 2);
  return absl::OkStatus();
}

absl::Status ConvTranspose2dBackwardInput(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 2, true));
  auto s = MakeConvSetup(c.inputs[0].shape(), c.inputs[1].shape(), c.outputs[0].shape(), p, false);
  if (!s) return HandOn(c, "onednn_" + c.op.name);
  RunConvForward(*s, c.inputs[0], c.inputs[1], nullptr, c.outputs[0]);
  return absl::OkStatus();
}

absl::Status ConvTranspose2dBackwardWeight(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 2, true));
  auto s = MakeConvSetup(c.inputs[0].shape(), c.outputs[0].shape(), c.inputs[1].shape(), p, false);
  if (!s) return HandOn(c, "onednn_" + c.op.name);
  RunConvBackwardWeights(*s, c.inputs[1], c.inputs[0], c.outputs[0]);
  return absl::OkStatus();
}

}  // namespace

// Called from RegisterNnKernels (onednn_nn.cc).
void RegisterConvNdTransposeKernels(KernelTable& t) {
  AddF32Kernel(t, "conv3d", Conv3d);
  AddF32Kernel(t, "conv3d_backward_input", Conv3dBackwardInput);
  AddF32Kernel(t, "conv3d_backward_weight", Conv3dBackwardWeight);
  AddF32Kernel(t, "conv_transpose2d", ConvTranspose2d);
  AddF32Kernel(t, "conv_transpose2d_backward_input", ConvTranspose2dBackwardInput);
  AddF32Kernel(t, "conv_transpose2d_backward_weight", ConvTranspose2dBackwardWeight);
}

}  // namespace tensord::cpu::onednn
