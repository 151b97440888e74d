// oneDNN kernels of the f32 3-d and transposed convolutions: conv3d and conv_transpose2d, each with
// its input and weight gradients. All six run oneDNN's convolution primitives (forward, backward
// data, backward weights) in the roles of a convolution from `x` to `y`: a transposed
// convolution is the adjoint of the convolution with the same attributes, and PyTorch's
// transposed weight [C_in, C_out/groups, *k] is that convolution's weight [O, C/groups, *k]
// as it is, so no weight reorder is needed (oneDNN's deconvolution runs the same kernels).
// Like conv2d's kernels, the primitives choose blocked layouts and operands are reordered
// around the call. Calls oneDNN cannot reproduce exactly (empty tensors, an output_padding of
// at least the stride) are refused when planned, so the loop kernels run them.
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
  if (!s) return NotPlanned(c);
  RunConvForward(*s, c.inputs[0], c.inputs[1], bias ? &c.inputs[2] : nullptr, c.outputs[0]);
  return absl::OkStatus();
}

absl::Status Conv3dBackwardInput(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 3, false));
  auto s = MakeConvSetup(c.outputs[0].shape(), c.inputs[1].shape(), c.inputs[0].shape(), p, false);
  if (!s) return NotPlanned(c);
  RunConvBackwardData(*s, c.inputs[0], c.inputs[1], c.outputs[0]);
  return absl::OkStatus();
}

absl::Status Conv3dBackwardWeight(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 3, false));
  auto s = MakeConvSetup(c.inputs[1].shape(), c.outputs[0].shape(), c.inputs[0].shape(), p, false);
  if (!s) return NotPlanned(c);
  RunConvBackwardWeights(*s, c.inputs[0], c.inputs[1], c.outputs[0]);
  return absl::OkStatus();
}

// The transposed convolution's output is the convolution's x, its input the convolution's y.
absl::Status ConvTranspose2d(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 2, true));
  auto s = MakeConvSetup(c.outputs[0].shape(), c.inputs[1].shape(), c.inputs[0].shape(), p, false);
  if (!s) return NotPlanned(c);
  RunConvBackwardData(*s, c.inputs[0], c.inputs[1], c.outputs[0]);
  if (c.inputs.size() == 3) AddBias(c.outputs[0], c.inputs[2], 2);
  return absl::OkStatus();
}

absl::Status ConvTranspose2dBackwardInput(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 2, true));
  auto s = MakeConvSetup(c.inputs[0].shape(), c.inputs[1].shape(), c.outputs[0].shape(), p, false);
  if (!s) return NotPlanned(c);
  RunConvForward(*s, c.inputs[0], c.inputs[1], nullptr, c.outputs[0]);
  return absl::OkStatus();
}

absl::Status ConvTranspose2dBackwardWeight(KernelCall& c) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p, nn::ReadConvNdParams(c.op.name, c.attrs, 2, true));
  auto s = MakeConvSetup(c.inputs[0].shape(), c.outputs[0].shape(), c.inputs[1].shape(), p, false);
  if (!s) return NotPlanned(c);
  RunConvBackwardWeights(*s, c.inputs[1], c.inputs[0], c.outputs[0]);
  return absl::OkStatus();
}

}  // namespace

// Called from RegisterNnKernels (onednn_nn.cc).
void RegisterConvNdTransposeKernels(KernelTable& t) {
  // Each kernel with where it finds the convolution's x, w and y (a transposed convolution's
  // output is the convolution's x, its input the convolution's y).
  const auto add = [&t](const char* op, KernelFn fn, ConvRoles roles, int spatial,
                        bool transposed) {
    AddF32Kernel(t, op, std::move(fn), [=](const KernelQuery& q) {
      return ConvSetupExists(q, roles, spatial, transposed);
    });
  };
  add("conv3d", Conv3d, {0, 1, kOutput}, 3, false);
  add("conv3d_backward_input", Conv3dBackwardInput, {kOutput, 1, 0}, 3, false);
  add("conv3d_backward_weight", Conv3dBackwardWeight, {1, kOutput, 0}, 3, false);
  add("conv_transpose2d", ConvTranspose2d, {kOutput, 1, 0}, 2, true);
  add("conv_transpose2d_backward_input", ConvTranspose2dBackwardInput, {0, 1, kOutput}, 2, true);
  add("conv_transpose2d_backward_weight", ConvTranspose2dBackwardWeight, {0, kOutput, 1}, 2, true);
}

}  // namespace tensord::cpu::onednn
