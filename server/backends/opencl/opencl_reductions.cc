#include "server/backends/opencl/opencl_reductions.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/reduction_exprs.h"
#include "server/backends/gpu/reduction_source.h"
#include "server/backends/opencl/opencl_elementwise.h"

namespace tensord::opencl {

bool IsGroupOp(const std::string& op) { return gpu::HasGroup(op); }

absl::Status RunGroup(KernelCall& c, ClDevice& device) {
  std::vector<int64_t> ranks;
  std::vector<DType> dtypes;
  for (const Tensor& t : c.inputs) {
    ranks.push_back(t.rank());
    dtypes.push_back(t.dtype());
  }
  Tensor& out = c.outputs[0];
  ASSIGN_OR_RETURN(gpu::GroupPlan plan,
                   gpu::PlanGroup(c.op.name, c.attrs, ranks, dtypes, out.dtype()));
  const Tensor& walked = c.inputs[plan.walked[0]];
  const gpu::ReductionGeometry g = gpu::ReduceGeometry(walked.shape(), plan.dims);
  const int64_t n_groups = NumElements(g.kept.shape);
  if (n_groups == 0 || out.numel() == 0) return absl::OkStatus();

  gpu::GroupKernel k;
  k.body = plan.body;
  k.compute = plan.compute;
  k.output = out.dtype();
  k.indices = plan.indices;
  std::vector<DType> key;
  for (int w : plan.walked) k.walked.push_back(c.inputs[w].dtype());
  for (int i : plan.groups) k.groups.push_back(c.inputs[i].dtype());
  key.insert(key.end(), k.walked.begin(), k.walked.end());
  key.insert(key.end(), k.groups.begin(), k.groups.end());
  key.push_back(k.output);
  key.push_back(k.compute);
  k.name = KernelName(c.op.name, key);
  // The name holds op and dtypes; the body tells apart an op's attribute forms (norm's p).
  ASSIGN_OR_RETURN(BuiltKernel * built,
                   device.Kernel(absl::StrCat(k.name, "|", k.body), k.name,
                                 [&k] { return gpu::RenderGroup(gpu::OpenClDialect(), k); }));

  std::vector<int64_t> flat = g.kept.Flat();
  const std::vector<int64_t> reduced = g.reduced.Flat();
  flat.insert(flat.end(), reduced.begin(), reduced.end());
  ASSIGN_OR_RETURN(cl_mem geom, device.Constants(flat));
  Operand geometry_arg = Operand::Owning(geom);
  std::vector<Operand> operands;
  operands.reserve(1 + plan.walked.size() + plan.groups.size());
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  operands.push_back(std::move(out_arg));
  if (plan.indices) {
    ASSIGN_OR_RETURN(Operand idx_arg, Operand::Of(c.outputs[1], device));
    operands.push_back(std::move(idx_arg));
  }
  for (const std::vector<int>* list : {&plan.walked, &plan.groups}) {
    for (int i : *list) {
      ASSIGN_OR_RETURN(Operand o, Operand::Of(c.inputs[i], device));
      operands.push_back(std::move(o));
    }
  }
  absl::MutexLock lock(&built->mu);
  Args args(built->kernel);
  for (const Operand& o : operands) args.AddMem(o);
  args.AddMem(geometry_arg)
      .Add(static_cast<cl_long>(n_groups))
      .Add(static_cast<cl_int>(g.kept.shape.size()))
      .Add(static_cast<cl_int>(g.reduced.shape.size()))
      .Add(static_cast<cl_long>(NumElements(g.reduced.shape)))
      .Add(static_cast<cl_double>(plan.scalar));
  if (args.error() != CL_SUCCESS) {
    return ClError(args.error(), "clSetKernelArg " + k.name, device.name());
  }
  return device.Launch(built->kernel, n_groups);
}

}  // namespace tensord::opencl
