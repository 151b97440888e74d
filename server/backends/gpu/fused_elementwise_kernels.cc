// The GPU kernel of fused_elementwise (server/ops/elementwise_fusion.h): one generated kernel
// for the whole expression (codegen/fused_elementwise_source.h), each step the expression of
// the map its own call would have run, in the same compute dtype. A step is accepted only where
// that call would have run a generated map here (no other family's kernel) whose expression
// the device compiles; kernels are compiled without contraction, so each intermediate value is
// the one that call would have stored.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/fused_elementwise_source.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/ops/elementwise_fusion.h"
#include "server/ops/registry.h"

namespace tensord::gpu {
namespace {

using fusion::Step;

// The steps as the kernel computes them in `dtype` on `device`, or nullopt when a step's own
// call would not run a generated map there.
std::optional<std::vector<FusedStep>> PlanSteps(const std::vector<Step>& steps, DType dtype,
                                                const DeviceRuntime& device) {
  const GpuKernelTable& table = GpuKernelTable::Get();
  std::vector<FusedStep> out;
  for (const Step& s : steps) {
    FusedStep f;
    if (s.input) {
      f.input = s.index;
      out.push_back(std::move(f));
      continue;
    }
    absl::StatusOr<const OpDef*> def = OpRegistry::Builtin().Find(fusion::OpOf(s.fn));
    if (!def.ok()) return std::nullopt;
    const GpuKernel* kernel = table.Find(**def);
    if (kernel == nullptr || kernel->form == nullptr) return std::nullopt;
    absl::StatusOr<Attrs> attrs = ValidateAttrs((*def)->name, (*def)->attrs, fusion::StepAttrs(s));
    if (!attrs.ok()) return std::nullopt;
    std::optional<ElementwisePlan> plan = PlanElementwise(*kernel->form, *attrs, dtype, dtype);
    if (!plan || plan->compute != dtype || plan->expr.arity != fusion::Arity(s.fn) ||
        (!plan->expr.helpers.empty() && !device.has_fp64())) {
      return std::nullopt;
    }
    f.expr = std::move(plan->expr);
    out.push_back(std::move(f));
  }
  return out;
}

// An expression planned for a device: its steps, and the part of its kernel's cache key they
// determine (each step's expression, or the input it pushes).
struct PlannedExpression {
  std::vector<FusedStep> steps;
  std::string key;
};

// PlanSteps through a small cache per thread, keyed by device, dtype and expression: a
// program's fused call, launched again and again, plans its steps once per server thread.
std::shared_ptr<const PlannedExpression> CachedPlan(const std::vector<Step>& steps,
                                                    const std::string& text, DType dtype,
                                                    const DeviceRuntime& device) {
  constexpr size_t kMaxEntries = 256;
  thread_local absl::flat_hash_map<std::string, std::shared_ptr<const PlannedExpression>> cache;
  std::string key = absl::StrCat(device.name(), "|", DTypeName(dtype), "|", text);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::optional<std::vector<FusedStep>> planned = PlanSteps(steps, dtype, device);
  if (!planned) return nullptr;
  auto expression = std::make_shared<PlannedExpression>();
  expression->steps = *std::move(planned);
  for (const FusedStep& s : expression->steps) {
    absl::StrAppend(&expression->key, "|", s.input >= 0 ? absl::StrCat("$", s.input) : s.expr.expr);
  }
  if (cache.size() >= kMaxEntries) cache.clear();
  cache.emplace(std::move(key), expression);
  return expression;
}

absl::Status RunFused(KernelCall& c, DeviceRuntime& device) {
  Tensor& out = c.outputs[0];
  if (out.numel() == 0) return absl::OkStatus();
  const std::string text = c.attrs.GetString(fusion::kStepsAttr);
  ASSIGN_OR_RETURN(std::shared_ptr<const std::vector<Step>> steps,
                   fusion::CachedSteps(text, c.inputs.size()));
  std::shared_ptr<const PlannedExpression> planned = CachedPlan(*steps, text, out.dtype(), device);
  if (planned == nullptr) {
    return Error(Reason::kInternal,
                 absl::StrCat(device.name(), ": ", fusion::kElementwiseOp,
                              " was given a call it refuses when planned"),
                 {{"op", fusion::kElementwiseOp}, {"device", device.name()}});
  }
  FusedElementwiseKernel k;  // its steps are `planned`'s, copied only to render a source
  k.dtype = out.dtype();
  std::vector<Shape> shapes;
  for (const Tensor& t : c.inputs) {
    k.inputs.push_back(t.dtype());
    k.by_value.push_back(IsNumberOperand(t));
    shapes.push_back(t.shape());
  }
  std::vector<DType> dtypes = k.inputs;
  dtypes.push_back(k.dtype);
  k.name = KernelName(fusion::kElementwiseOp, dtypes);
  // Compiled once per expression: its steps' expressions and what each pushes.
  std::string key = k.name;
  for (size_t i = 0; i < k.inputs.size(); ++i) absl::StrAppend(&key, k.by_value[i] ? "v" : "b");
  absl::StrAppend(&key, planned->key);
  const KernelSource kernel{key, k.name, [&k, &planned](const Dialect& dialect) {
                              FusedElementwiseKernel full = k;
                              full.steps = planned->steps;
                              return RenderFusedElementwise(dialect, full);
                            }};
  std::vector<Operand> operands(c.inputs.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!k.by_value[i]) {
      ASSIGN_OR_RETURN(operands[i], Operand::Of(c.inputs[i], device));
    }
  }
  const Geometry geometry = BroadcastGeometry(out.shape(), shapes);
  ASSIGN_OR_RETURN(Operand geometry_arg, Operand::Constants(device, geometry.Flat()));
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  Launch launch(kernel, out.numel());
  Args& args = launch.args;
  args.AddMem(out_arg);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (k.by_value[i]) {
      args.Bytes(c.inputs[i].raw(), c.inputs[i].nbytes());
    } else {
      args.AddMem(operands[i]);
    }
  }
  args.AddMem(geometry_arg)
      .Add(static_cast<int64_t>(out.numel()))
      .Add(static_cast<int32_t>(geometry.shape.size()));
  for (const FusedStep& s : planned->steps) {
    for (double v : s.expr.scalars) args.AddScalar(k.dtype, v);
  }
  return Enqueue(device, launch);
}

}  // namespace

void RegisterFusedElementwiseKernels(GpuKernelTable& t) {
  GpuKernel k = KernelOf(RunFused);
  k.supports = [](const KernelQuery& q, const DeviceRuntime& device) {
    if (q.outputs.size() != 1) return false;
    const DType dtype = q.outputs[0].dtype;
    for (const TensorMeta& m : q.inputs) {
      if (m.dtype != dtype) return false;
    }
    absl::StatusOr<std::vector<Step>> steps =
        fusion::ParseSteps(q.attrs->GetString(fusion::kStepsAttr), q.inputs.size());
    return steps.ok() && PlanSteps(*steps, dtype, device).has_value();
  };
  t.Add(fusion::kElementwiseOp, std::move(k));
}

}  // namespace tensord::gpu
