#include "server/backends/gpu/reduction_kernels.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/reduction_exprs.h"
#include "server/backends/gpu/codegen/reduction_source.h"
#include "server/backends/gpu/launch.h"

namespace tensord::gpu {

bool IsGroupOp(const std::string& op) { return gpu::HasGroup(op); }

absl::Status LaunchGroup(DeviceRuntime& device, const std::string& op, const gpu::GroupPlan& plan,
                         const std::vector<Tensor>& inputs, Tensor& out, Tensor* indices) {
  const Tensor& walked = inputs[plan.walked[0]];
  const gpu::ReductionGeometry g = gpu::ReduceGeometry(walked.shape(), plan.dims);
  const int64_t n_groups = NumElements(g.kept.shape);
  if (n_groups == 0 || out.numel() == 0) return absl::OkStatus();

  gpu::GroupKernel k;
  k.body = plan.body;
  k.compute = plan.compute;
  k.output = out.dtype();
  k.indices = indices != nullptr;
  for (int w : plan.walked) k.walked.push_back(inputs[w].dtype());
  for (int i : plan.groups) k.groups.push_back(inputs[i].dtype());
  for (int i : plan.tables) k.tables.push_back(inputs[i].dtype());
  std::vector<DType> key = k.walked;
  key.insert(key.end(), k.groups.begin(), k.groups.end());
  key.insert(key.end(), k.tables.begin(), k.tables.end());
  key.push_back(k.output);
  key.push_back(k.compute);
  k.name = KernelName(op, key);
  // The name holds op and dtypes; the body tells apart an op's attribute forms (norm's p).
  ASSIGN_OR_RETURN(CompiledKernel * built,
                   device.Kernel(absl::StrCat(k.name, "|", k.indices, "|", k.body), k.name,
                                 [&k, &device] { return gpu::RenderGroup(device.dialect(), k); }));

  std::vector<int64_t> flat = g.kept.Flat();
  const std::vector<int64_t> reduced = g.reduced.Flat();
  flat.insert(flat.end(), reduced.begin(), reduced.end());
  ASSIGN_OR_RETURN(Operand geometry_arg, Operand::Constants(device, flat));
  std::vector<Operand> operands;
  operands.reserve(2 + plan.walked.size() + plan.groups.size() + plan.tables.size());
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  operands.push_back(std::move(out_arg));
  if (indices != nullptr) {
    ASSIGN_OR_RETURN(Operand idx_arg, Operand::Of(*indices, device));
    operands.push_back(std::move(idx_arg));
  }
  for (const std::vector<int>* list : {&plan.walked, &plan.groups, &plan.tables}) {
    for (int i : *list) {
      ASSIGN_OR_RETURN(Operand o, Operand::Of(inputs[i], device));
      operands.push_back(std::move(o));
    }
  }
  return SetAndLaunch(device, built, k.name, n_groups, [&](Args& args) {
    for (const Operand& o : operands) args.AddMem(o);
    args.AddMem(geometry_arg)
        .Add(static_cast<int64_t>(n_groups))
        .Add(static_cast<int32_t>(g.kept.shape.size()))
        .Add(static_cast<int32_t>(g.reduced.shape.size()))
        .Add(static_cast<int64_t>(NumElements(g.reduced.shape)))
        .AddWide(device, plan.scalar);
  });
}

absl::Status RunGroup(KernelCall& c, DeviceRuntime& device) {
  std::vector<int64_t> ranks;
  std::vector<DType> dtypes;
  for (const Tensor& t : c.inputs) {
    ranks.push_back(t.rank());
    dtypes.push_back(t.dtype());
  }
  ASSIGN_OR_RETURN(gpu::GroupPlan plan,
                   gpu::PlanGroup(c.op.name, c.attrs, ranks, dtypes, c.outputs[0].dtype()));
  const std::vector<Tensor> inputs(c.inputs.begin(), c.inputs.end());
  return LaunchGroup(device, c.op.name, plan, inputs, c.outputs[0],
                     plan.indices ? &c.outputs[1] : nullptr);
}

}  // namespace tensord::gpu
