// The elementwise kernels of a GPU device: maps over broadcast operands (arithmetic,
// comparisons, float functions, activations and their backward ops, where), generated from the
// expressions of gpu/codegen/elementwise_exprs.h; and the kernels that move storage as it is:
// fills, views, strided copies (permute, transpose, expand, contiguous, clone), casts and
// assign.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/elementwise_exprs.h"
#include "server/backends/gpu/codegen/kernel_source.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/core/status.h"
#include "server/ops/elementwise.h"
#include "server/ops/registry.h"
#include "server/ops/shape_ops.h"

namespace tensord::gpu {
namespace {

std::vector<int64_t> PermutedStrides(const Tensor& x, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> in = ContiguousStrides(x.shape());
  std::vector<int64_t> out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = in[perm[i]];
  return out;
}

absl::StatusOr<std::vector<int64_t>> Permutation(const KernelCall& c, bool by_dims) {
  const Tensor& x = c.inputs[0];
  if (by_dims) return ops::NormalizePermutation("permute", c.attrs.GetInts("dims"), x.rank());
  return ops::TransposePermutation(c.attrs, x.rank());
}

absl::Status RunAssign(KernelCall& c, DeviceRuntime& device) {
  Tensor target = c.inputs[0];
  Tensor value = c.inputs[1];
  if (value.storage() == target.storage() && value.shape() != target.shape()) {
    // Broadcasting a tensor onto its own storage: read from a copy.
    ASSIGN_OR_RETURN(Tensor copy, Tensor::EmptyOn(device.shared_from_this(), value.dtype(),
                                                  value.shape(), value.device(), c.account));
    RETURN_IF_ERROR(Copy(device, "clone", value, ContiguousStrides(value.shape()), copy));
    value = copy;
  }
  if (value.storage() != target.storage()) {
    RETURN_IF_ERROR(
        Copy(device, "assign", value, BroadcastStrides(value.shape(), target.shape()), target));
  }
  target.storage()->BumpVersion();
  c.outputs[0] = target;
  return absl::OkStatus();
}

// permute (by_dims) and transpose: a strided read of the permuted input.
absl::Status RunPermute(KernelCall& c, DeviceRuntime& device, bool by_dims) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, Permutation(c, by_dims));
  return Copy(device, "permute", x, PermutedStrides(x, perm), c.outputs[0]);
}

absl::Status RunExpand(KernelCall& c, DeviceRuntime& device) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  return Copy(device, "expand", x, BroadcastStrides(x.shape(), out.shape()), out);
}

// contiguous and clone copy; to_dtype casts (`kernel` names the copy kernel).
absl::Status RunCopy(KernelCall& c, DeviceRuntime& device, const char* kernel) {
  const Tensor& x = c.inputs[0];
  return Copy(device, kernel, x, ContiguousStrides(x.shape()), c.outputs[0]);
}

absl::Status RunView(KernelCall& c, DeviceRuntime&) {
  c.outputs[0] = c.inputs[0].Reshaped(c.output_metas[0].shape);
  return absl::OkStatus();
}

// zeros and ones fill `value`; full reads it from its attribute (nullopt).
absl::Status RunFill(KernelCall& c, DeviceRuntime& device, std::optional<double> value) {
  return Fill(device, value ? *value : c.attrs.GetFloat("value"), c.outputs[0]);
}

// Whether an integer call divides (and so checks its divisor for zeros first, as the CPU
// does): always (fmod, remainder), with a rounding mode (div), or never.
enum class Divides { kNever, kAlways, kWithRoundingMode };

absl::Status RunElementwise(KernelCall& c, DeviceRuntime& device, const ElementwiseForm* form,
                            Divides divides) {
  const std::string& op = c.op.name;
  std::optional<ElementwisePlan> plan =
      PlanElementwise(*form, c.attrs, c.inputs[0].dtype(), c.outputs[0].dtype());
  if (!plan) {
    return Error(Reason::kInternal,
                 absl::StrCat(device.name(), ": ", op, " was given a call it refuses when planned"),
                 {{"op", op}, {"backend", device.kind()}, {"device", device.name()}});
  }
  const bool rounding = c.attrs.Has("rounding_mode");
  const bool checks =
      divides == Divides::kAlways || (divides == Divides::kWithRoundingMode && rounding);
  if (checks && IsInt(plan->compute)) {
    ASSIGN_OR_RETURN(bool zero, AnyZero(device, c.inputs[1]));
    if (zero) {
      return ops::IntegerDivisionByZero(op, rounding ? c.attrs.GetString("rounding_mode") : "");
    }
  }
  std::vector<Shape> shapes;
  for (const Tensor& t : c.inputs) shapes.push_back(t.shape());
  gpu::Geometry g = gpu::BroadcastGeometry(c.outputs[0].shape(), shapes);
  std::vector<Tensor> inputs(c.inputs.begin(), c.inputs.end());
  return LaunchMap(device, op, plan->expr, plan->compute, inputs, g, c.outputs[0]);
}

}  // namespace

void RegisterCopyKernels(GpuKernelTable& t) {
  for (const auto& [op, value] : {std::pair{"zeros", std::optional<double>(0.0)},
                                  std::pair{"zeros_like", std::optional<double>(0.0)},
                                  std::pair{"ones", std::optional<double>(1.0)},
                                  std::pair{"ones_like", std::optional<double>(1.0)},
                                  std::pair{"full", std::optional<double>()},
                                  std::pair{"full_like", std::optional<double>()}}) {
    t.Add(op, MovingBits(KernelOf(RunFill, value)));
  }
  for (const char* op : {"reshape", "flatten", "squeeze", "unsqueeze", "detach"}) {
    t.Add(op, MovingBits(KernelOf(RunView)));
  }
  t.Add("permute", MovingBits(KernelOf(RunPermute, true)));
  t.Add("transpose", MovingBits(KernelOf(RunPermute, false)));
  t.Add("expand", MovingBits(KernelOf(RunExpand)));
  t.Add("contiguous", MovingBits(KernelOf(RunCopy, "copy")));
  t.Add("clone", MovingBits(KernelOf(RunCopy, "copy")));
  t.Add("to_dtype", MovingBits(KernelOf(RunCopy, "cast")));
  t.Add("assign", MovingBits(KernelOf(RunAssign)));
}

void RegisterElementwiseKernels(GpuKernelTable& t) {
  const auto add = [&t](const std::string& op, Divides divides) {
    const ElementwiseForm* form = FindElementwiseForm(op);
    GpuKernel k = KernelOf(RunElementwise, form, divides);
    k.form = form;
    k.supports = [form](const KernelQuery& q, const DeviceRuntime& device) {
      if (q.outputs.empty()) return false;
      const std::optional<ElementwisePlan> plan =
          PlanElementwise(*form, *q.attrs, q.inputs[0].dtype, q.outputs[0].dtype);
      // Helpers may compute in double.
      return plan.has_value() && (plan->expr.helpers.empty() || device.has_fp64());
    };
    t.Add(op, std::move(k));
  };
  add("div", Divides::kWithRoundingMode);
  add("fmod", Divides::kAlways);
  add("remainder", Divides::kAlways);
  // Every other op with an expression that no other family runs.
  for (const OpDef* op : OpRegistry::Builtin().All()) {
    if (FindElementwiseForm(op->name) != nullptr && t.Find(*op) == nullptr) {
      add(op->name, Divides::kNever);
    }
  }
}

}  // namespace tensord::gpu
