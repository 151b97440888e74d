#include "server/backends/gpu/launch.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"

namespace tensord::gpu {

std::string KernelName(const std::string& op, const std::vector<DType>& dtypes) {
  std::string name = absl::StrCat("td_", op);
  for (DType d : dtypes) absl::StrAppend(&name, "_", DTypeName(d));
  return name;
}

namespace {

std::atomic<int> kernel_group_cap{0};

// The largest work group `built` runs on.
int GroupLimit(const DeviceRuntime& device, const CompiledKernel& built) {
  int limit = built.max_group_size > 0 ? built.max_group_size : device.max_group_size();
  if (const int cap = kernel_group_cap.load(); cap > 0) limit = std::min(limit, cap);
  return limit;
}

absl::Status Run(DeviceRuntime& device, CompiledKernel* built, const Launch& launch) {
  if (launch.group > 0) {
    if (launch.group > GroupLimit(device, *built)) {
      return Error(Reason::kInternal,
                   absl::StrCat(launch.kernel.name, ": work groups of ", launch.group,
                                " items; the kernel runs on at most ", GroupLimit(device, *built)),
                   {{"device", device.name()}});
    }
    return device.LaunchGroups(built, launch.args, launch.items / launch.group, launch.group);
  }
  return device.Launch(built, launch.args, launch.items);
}

}  // namespace

void CapKernelGroups(int size) { kernel_group_cap.store(size); }

absl::Status Enqueue(DeviceRuntime& device, const Launch& launch) {
  const KernelSource& k = launch.kernel;
  ASSIGN_OR_RETURN(CompiledKernel * built,
                   device.Kernel(k.key.empty() ? k.name : k.key, k.name, k.render));
  return Run(device, built, launch);
}

absl::StatusOr<bool> EnqueueIfGroupsFit(DeviceRuntime& device, const Launch& launch) {
  const KernelSource& k = launch.kernel;
  ASSIGN_OR_RETURN(CompiledKernel * built,
                   device.Kernel(k.key.empty() ? k.name : k.key, k.name, k.render));
  if (launch.group > GroupLimit(device, *built)) return false;
  RETURN_IF_ERROR(Run(device, built, launch));
  return true;
}

absl::StatusOr<Tensor> ReadToHost(const Tensor& t, DeviceRuntime& device) {
  if (t.nbytes() == 0 || t.storage()->on_host()) return t;
  ASSIGN_OR_RETURN(Tensor host, Tensor::Empty(t.dtype(), t.shape()));
  RETURN_IF_ERROR(device.Read(t.raw(), 0, host.raw(), t.nbytes()));
  return host;
}

absl::StatusOr<bool> AnyZero(DeviceRuntime& device, const Tensor& t) {
  if (t.numel() == 0) return false;
  if (t.storage()->on_host()) {
    for (double v : t.ToDoubles()) {
      if (v == 0) return true;
    }
    return false;
  }
  const std::string name = KernelName("any_zero", {t.dtype()});
  Launch launch(
      {name, name,
       [&](const Dialect& dialect) { return gpu::RenderAnyZero(dialect, name, t.dtype()); }},
      t.numel());
  ASSIGN_OR_RETURN(Operand flag, Operand::Block(device, sizeof(int32_t)));
  const int32_t zero = 0;
  RETURN_IF_ERROR(device.Write(flag.mutable_block(), 0, &zero, sizeof(zero)));
  ASSIGN_OR_RETURN(Operand x, Operand::Of(t, device));
  launch.args.AddMem(flag).AddMem(x).Add(static_cast<int64_t>(t.numel()));
  RETURN_IF_ERROR(Enqueue(device, launch));
  int32_t found = 0;
  RETURN_IF_ERROR(device.Read(flag.block(), 0, &found, sizeof(found)));
  return found != 0;
}

// out[i] = expr over `inputs` walked by `geometry` (per input strides).
absl::Status LaunchMap(DeviceRuntime& device, const std::string& op,
                       const gpu::ElementwiseExpr& expr, DType compute,
                       const std::vector<Tensor>& inputs, const gpu::Geometry& geometry,
                       Tensor& out) {
  if (out.numel() == 0) return absl::OkStatus();
  gpu::ElementwiseKernel k;
  k.expr = expr.expr;
  k.output = out.dtype();
  k.compute = compute;
  k.num_scalars = static_cast<int>(expr.scalars.size());
  k.helpers = expr.helpers;
  for (const Tensor& t : inputs) {
    k.inputs.push_back(t.dtype());
    k.by_value.push_back(IsNumberOperand(t));
  }
  std::vector<DType> key = k.inputs;
  key.push_back(k.output);
  key.push_back(compute);
  k.name = KernelName(op, key);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (k.by_value[i]) absl::StrAppend(&k.name, "_v", i);
  }
  // The name holds op and dtypes; the expression tells apart an op's attribute forms.
  Launch launch({absl::StrCat(k.name, "|", k.expr), k.name,
                 [&k](const Dialect& dialect) { return gpu::RenderElementwise(dialect, k); }},
                out.numel());
  std::vector<Operand> operands;
  operands.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Operand o;  // none for a number operand: its value is the argument
    if (!k.by_value[i]) {
      ASSIGN_OR_RETURN(o, Operand::Of(inputs[i], device));
    }
    operands.push_back(std::move(o));
  }
  ASSIGN_OR_RETURN(Operand geometry_arg, Operand::Constants(device, geometry.Flat()));
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  Args& args = launch.args;
  args.AddMem(out_arg);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (k.by_value[i]) {
      args.Bytes(inputs[i].raw(), inputs[i].nbytes());
    } else {
      args.AddMem(operands[i]);
    }
  }
  args.AddMem(geometry_arg)
      .Add(static_cast<int64_t>(out.numel()))
      .Add(static_cast<int32_t>(geometry.shape.size()));
  for (double v : expr.scalars) args.AddScalar(compute, v);
  return Enqueue(device, launch);
}

absl::Status Copy(DeviceRuntime& device, const std::string& op, const Tensor& in,
                  std::vector<int64_t> strides, Tensor& out) {
  gpu::ElementwiseExpr identity;
  identity.expr = "a";
  gpu::Geometry g = gpu::StridedGeometry(out.shape(), {std::move(strides)});
  return LaunchMap(device, op, identity, in.dtype(), {in}, g, out);
}

absl::Status Fill(DeviceRuntime& device, double value, Tensor& out) {
  gpu::ElementwiseExpr fill;
  fill.expr = "s0";
  fill.scalars = {value};
  return LaunchMap(device, "fill", fill, out.dtype(), {}, gpu::Geometry{}, out);
}

absl::Status AddInPlace(DeviceRuntime& device, const Tensor& addend, Tensor& out) {
  gpu::ElementwiseExpr add;
  add.expr = "a + b";
  gpu::Geometry g = gpu::BroadcastGeometry(out.shape(), {out.shape(), addend.shape()});
  return LaunchMap(device, "add_in_place", add, out.dtype(), {out, addend}, g, out);
}

}  // namespace tensord::gpu
