// The optimizer ops (sgd, adam, adamw) on a GPU device: the step counter is read to the
// host (one small blocking read), the step's scalars are computed there as on the CPU, one
// generated kernel (server/backends/gpu/codegen/optimizer_source.h) updates param and state, and
// the counter is written back incremented.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/optimizer_source.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/ops/optimizers.h"

namespace tensord::gpu {
namespace {

absl::StatusOr<double> ReadStep(const Tensor& step, DeviceRuntime& device) {
  double value = 0;
  std::vector<unsigned char> bytes(step.nbytes());
  RETURN_IF_ERROR(device.Read(step.raw(), 0, bytes.data(), bytes.size()));
  TENSORD_DISPATCH_NUMERIC(step.dtype(), [&] {
    T v;
    std::memcpy(&v, bytes.data(), sizeof(T));
    value = static_cast<double>(v);
  });
  return value;
}

// The counter after this step, in its own dtype (torch's `step_t += 1`).
absl::Status WriteStep(Tensor& step, double value, DeviceRuntime& device) {
  RETURN_IF_ERROR(Fill(device, value, step));
  step.storage()->BumpVersion();
  return absl::OkStatus();
}

// One step's launch: the operands' blocks, the element count, the step's scalars, its flags.
absl::Status LaunchStep(DeviceRuntime& device, const KernelSource& kernel,
                        const std::vector<const Tensor*>& buffers, int64_t n,
                        const std::vector<double>& scalars, DType dtype, int flags) {
  std::vector<Operand> operands;
  operands.reserve(buffers.size());
  for (const Tensor* t : buffers) {
    ASSIGN_OR_RETURN(Operand o, Operand::Of(*t, device));
    operands.push_back(std::move(o));
  }
  Launch launch(kernel, n);
  Args& args = launch.args;
  for (const Operand& o : operands) args.AddMem(o);
  args.Add(static_cast<int64_t>(n));
  for (double s : scalars) args.AddScalar(dtype, s);
  args.Add(static_cast<int32_t>(flags));
  return Enqueue(device, launch);
}

// What an optimizer op steps (bound at registration).
enum class Step { kSgd, kAdam, kAdamW };

absl::Status RunSgd(KernelCall& c, DeviceRuntime& device) {
  const Attrs& a = c.attrs;
  const Tensor& param = c.inputs[0];
  const bool has_state = c.inputs.size() == 4;
  const bool momentum = a.GetFloat("momentum") != 0;
  double step = 0;
  if (has_state) {
    ASSIGN_OR_RETURN(step, ReadStep(c.inputs[3], device));
  }
  int flags = 0;
  if (a.GetFloat("weight_decay") != 0) flags |= gpu::kSgdWeightDecay;
  if (momentum && has_state) flags |= gpu::kSgdMomentum;
  if (a.GetBool("nesterov")) flags |= gpu::kSgdNesterov;
  if (a.GetBool("maximize")) flags |= gpu::kSgdMaximize;
  if (step == 0) flags |= gpu::kSgdFirstStep;
  const std::string name = absl::StrCat("td_sgd_", DTypeName(param.dtype()));
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderSgd(dialect, name, param.dtype());
                            }};
  if (param.numel() > 0) {
    const Tensor* buf = (flags & gpu::kSgdMomentum) ? &c.inputs[2] : &param;
    RETURN_IF_ERROR(LaunchStep(device, kernel, {&param, &c.inputs[1], buf}, param.numel(),
                               {-a.GetFloat("lr"), a.GetFloat("momentum"),
                                1 - a.GetFloat("dampening"), a.GetFloat("weight_decay")},
                               param.dtype(), flags));
  }
  if (has_state) {
    c.inputs[2].storage()->BumpVersion();
    RETURN_IF_ERROR(WriteStep(const_cast<Tensor&>(c.inputs[3]), step + 1, device));
  }
  return absl::OkStatus();
}

absl::Status RunAdam(KernelCall& c, DeviceRuntime& device, bool decoupled) {
  const Attrs& a = c.attrs;
  const Tensor& param = c.inputs[0];
  const bool amsgrad = c.inputs.size() == 6;
  ASSIGN_OR_RETURN(double step, ReadStep(c.inputs[4], device));
  const ops::AdamScalars s = ops::AdamStepScalars(a, step + 1);
  int flags = 0;
  if (s.weight_decay != 0) flags |= gpu::kAdamWeightDecay;
  if (decoupled) flags |= gpu::kAdamDecoupled;
  if (amsgrad) flags |= gpu::kAdamAmsgrad;
  if (a.GetBool("maximize")) flags |= gpu::kAdamMaximize;
  const std::string name = absl::StrCat("td_adam_", DTypeName(param.dtype()));
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderAdam(dialect, name, param.dtype());
                            }};
  if (param.numel() > 0) {
    RETURN_IF_ERROR(LaunchStep(
        device, kernel,
        {&param, &c.inputs[1], &c.inputs[2], &c.inputs[3], amsgrad ? &c.inputs[5] : &param},
        param.numel(),
        {s.beta1, 1 - s.beta1, s.beta2, 1 - s.beta2, s.weight_decay, 1 - s.lr * s.weight_decay,
         s.bias_correction2_sqrt, s.eps, -s.step_size},
        param.dtype(), flags));
  }
  for (int i : {2, 3, 5}) {
    if (i < static_cast<int>(c.inputs.size())) c.inputs[i].storage()->BumpVersion();
  }
  return WriteStep(const_cast<Tensor&>(c.inputs[4]), step + 1, device);
}

absl::Status RunOptimizer(KernelCall& c, DeviceRuntime& device, Step step) {
  RETURN_IF_ERROR(ops::CheckOptimizerAliasing(c.op, c.inputs));
  // A 0-d host tensor joins a device call as a number operand, copied to the device; what the
  // step writes must live there, or the write would go to that copy.
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (i == 1 || c.inputs[i].storage() == nullptr || !c.inputs[i].storage()->on_host()) continue;
    return Error(Reason::kDeviceMismatch,
                 absl::StrCat(c.op.name, ": ", c.op.input_names[i], " (input ", i,
                              ") is in host memory but the step runs on ", device.name(),
                              "; move it there with to_device"),
                 {{"op", c.op.name},
                  {"input_index", absl::StrCat(i)},
                  {"device", std::string(kHostDevice)},
                  {"other_device", device.name()}});
  }
  absl::Status st =
      step == Step::kSgd ? RunSgd(c, device) : RunAdam(c, device, step == Step::kAdamW);
  if (!st.ok()) return st;
  c.inputs[0].storage()->BumpVersion();
  c.outputs[0] = c.inputs[0];
  return absl::OkStatus();
}

}  // namespace

void RegisterOptimizerKernels(GpuKernelTable& t) {
  t.Add("sgd", KernelOf(RunOptimizer, Step::kSgd));
  t.Add("adam", KernelOf(RunOptimizer, Step::kAdam));
  t.Add("adamw", KernelOf(RunOptimizer, Step::kAdamW));
}

}  // namespace tensord::gpu
