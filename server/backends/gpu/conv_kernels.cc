// The convolutions on a GPU device: conv2d, conv3d and conv_transpose2d (conv1d and
// conv_transpose1d through their composites) and their gradients, each a pass of one
// correlation: through the vendor's convolution library where the device has one and it takes
// the call (conv_library.h), else through the device's GEMM where it takes the dtype
// (conv_gemm.h), else the direct kernels of gpu/conv_source.h.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/conv_source.h"
#include "server/backends/gpu/conv_gemm.h"
#include "server/backends/gpu/conv_library.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/core/status.h"
#include "server/ops/nn_geometry.h"

namespace tensord::gpu {
namespace {

// Which convolution an op is and which of its passes (bound at registration).
struct ConvCall {
  int spatial = 2;
  bool transposed = false;
  enum Part { kForward, kInput, kWeight } part = kForward;
};

// The attributes as the CPU kernels read them: conv2d's own reader, the N-d one otherwise.
absl::StatusOr<nn::ConvNdParams> Params(const std::string& op, const ConvCall& call,
                                        const Attrs& attrs) {
  if (call.spatial != 2 || call.transposed) {
    return nn::ReadConvNdParams(op, attrs, call.spatial, call.transposed);
  }
  ASSIGN_OR_RETURN(nn::Conv2dParams p2, nn::ReadConv2dParams(op, attrs));
  nn::ConvNdParams p;
  p.spatial = 2;
  p.stride = {p2.stride[0], p2.stride[1]};
  p.padding = {p2.padding[0], p2.padding[1]};
  p.dilation = {p2.dilation[0], p2.dilation[1]};
  p.groups = p2.groups;
  return p;
}

absl::Status RunConv(KernelCall& c, DeviceRuntime& device, ConvCall call) {
  const std::string& op = c.op.name;
  Tensor& out = c.outputs[0];
  if (out.numel() == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(nn::ConvNdParams p, Params(op, call, c.attrs));
  // The correlation's x, w and y roles, the pass, and its operands (a, b) in product order.
  // A transposed convolution's input is in the y role and its output in the x role.
  const Tensor* x = nullptr;
  const Tensor* w = nullptr;
  const Tensor* y = nullptr;
  const Tensor* a = &c.inputs[0];
  const Tensor* b = &c.inputs[1];
  gpu::ConvPass pass = gpu::ConvPass::kY;
  switch (call.part) {
    case ConvCall::kForward:
      w = &c.inputs[1];
      x = call.transposed ? &out : &c.inputs[0];
      y = call.transposed ? &c.inputs[0] : &out;
      pass = call.transposed ? gpu::ConvPass::kX : gpu::ConvPass::kY;
      break;
    case ConvCall::kInput:  // (grad_output, weight)
      w = &c.inputs[1];
      x = call.transposed ? &c.inputs[0] : &out;
      y = call.transposed ? &out : &c.inputs[0];
      pass = call.transposed ? gpu::ConvPass::kY : gpu::ConvPass::kX;
      break;
    case ConvCall::kWeight:  // (grad_output, input): y * x
      w = &out;
      x = call.transposed ? &c.inputs[0] : &c.inputs[1];
      y = call.transposed ? &c.inputs[1] : &c.inputs[0];
      a = y;
      b = x;
      pass = gpu::ConvPass::kW;
      break;
  }
  const nn::Correlation g = nn::MakeCorrelation(x->shape(), w->shape(), y->shape(), p);
  const bool bias = call.part == ConvCall::kForward && c.inputs.size() == 3;
  ASSIGN_OR_RETURN(
      const bool by_library,
      ConvThroughLibrary(device, pass, g, *a, *b, bias ? &c.inputs[2] : nullptr, out, c.account));
  if (by_library) return absl::OkStatus();
  if (ConvTakesGemm(device, out.dtype(), g)) {
    ASSIGN_OR_RETURN(
        const bool ran,
        ConvThroughGemm(device, pass, g, *a, *b, bias ? &c.inputs[2] : nullptr, out, c.account));
    if (ran) return absl::OkStatus();
  }
  const std::string name = absl::StrCat("td_conv_", static_cast<int>(pass), "_",
                                        DTypeName(out.dtype()), bias ? "_bias" : "");
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderConv(dialect, name, out.dtype(), pass, bias);
                            }};
  ASSIGN_OR_RETURN(Operand geometry_arg, Operand::Constants(device, gpu::CorrelationFlat(g)));
  std::vector<Operand> operands;
  std::vector<const Tensor*> args_in = {a, b};
  if (bias) args_in.push_back(&c.inputs[2]);
  for (const Tensor* t : args_in) {
    ASSIGN_OR_RETURN(Operand o, Operand::Of(*t, device));
    operands.push_back(std::move(o));
  }
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  Launch launch(kernel, out.numel());
  Args& args = launch.args;
  args.AddMem(out_arg);
  for (const Operand& o : operands) args.AddMem(o);
  args.AddMem(geometry_arg).Add(static_cast<int64_t>(out.numel()));
  return Enqueue(device, launch);
}

}  // namespace

void RegisterConvKernels(GpuKernelTable& t) {
  struct Forward {
    const char* op;
    int spatial;
    bool transposed;
  };
  for (const Forward f : {Forward{"conv2d", 2, false}, Forward{"conv3d", 3, false},
                          Forward{"conv_transpose2d", 2, true}}) {
    for (const auto& [suffix, part] :
         {std::pair{"", ConvCall::kForward}, std::pair{"_backward_input", ConvCall::kInput},
          std::pair{"_backward_weight", ConvCall::kWeight}}) {
      t.Add(absl::StrCat(f.op, suffix), KernelOf(RunConv, ConvCall{f.spatial, f.transposed, part}));
    }
  }
}

}  // namespace tensord::gpu
