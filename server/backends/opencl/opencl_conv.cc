#include "server/backends/opencl/opencl_conv.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/conv_source.h"
#include "server/backends/opencl/opencl_elementwise.h"
#include "server/core/status.h"
#include "server/ops/nn_geometry.h"

namespace tensord::opencl {

bool IsConvOp(const std::string& op) {
  return op == "conv2d" || op == "conv2d_backward_input" || op == "conv2d_backward_weight";
}

absl::Status RunConv(KernelCall& c, ClDevice& device) {
  const std::string& op = c.op.name;
  Tensor& out = c.outputs[0];
  if (out.numel() == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(nn::Conv2dParams p, nn::ReadConv2dParams(op, c.attrs));
  // Which tensors are the input, weight and output of the forward in this pass.
  gpu::ConvPass pass = gpu::ConvPass::kForward;
  const Tensor* x = &c.inputs[0];
  const Tensor* w = &c.inputs[1];
  const Tensor* y = &out;
  if (op == "conv2d_backward_input") {
    pass = gpu::ConvPass::kInputGrad;
    x = &out;
    y = &c.inputs[0];
  } else if (op == "conv2d_backward_weight") {
    pass = gpu::ConvPass::kWeightGrad;
    x = &c.inputs[1];
    w = &out;
    y = &c.inputs[0];
  }
  const nn::Nchw xs = nn::AsNchw(x->shape()), ys = nn::AsNchw(y->shape());
  gpu::ConvSizes sizes{xs.n,
                       xs.c,
                       xs.h,
                       xs.w,
                       ys.c,
                       ys.h,
                       ys.w,
                       w->dim(2),
                       w->dim(3),
                       p.groups,
                       {p.stride[0], p.stride[1]},
                       {p.padding[0], p.padding[1]},
                       {p.dilation[0], p.dilation[1]}};
  const bool bias = pass == gpu::ConvPass::kForward && c.inputs.size() == 3;
  const std::string name =
      absl::StrCat("td_", op, "_", DTypeName(out.dtype()), bias ? "_bias" : "");
  ASSIGN_OR_RETURN(BuiltKernel * built, device.Kernel(name, name, [&] {
    return gpu::RenderConv2d(gpu::OpenClDialect(), name, out.dtype(), pass, bias);
  }));
  ASSIGN_OR_RETURN(cl_mem geom, device.Constants(sizes.Flat()));
  Operand geometry_arg = Operand::Owning(geom);
  std::vector<Operand> operands;
  for (const Tensor& t : c.inputs) {
    ASSIGN_OR_RETURN(Operand o, Operand::Of(t, device));
    operands.push_back(std::move(o));
  }
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  absl::MutexLock lock(&built->mu);
  Args args(built->kernel);
  args.AddMem(out_arg);
  for (const Operand& o : operands) args.AddMem(o);
  args.AddMem(geometry_arg).Add(static_cast<cl_long>(out.numel()));
  if (args.error() != CL_SUCCESS) {
    return ClError(args.error(), "clSetKernelArg " + name, device.name());
  }
  return device.Launch(built->kernel, out.numel());
}

}  // namespace tensord::opencl
