#include "server/backends/gpu/op_families.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/activation_kernels.h"
#include "server/backends/gpu/codegen/elementwise_exprs.h"
#include "server/backends/gpu/codegen/kernel_source.h"
#include "server/backends/gpu/conv_kernels.h"
#include "server/backends/gpu/creation_kernels.h"
#include "server/backends/gpu/cross_entropy_kernels.h"
#include "server/backends/gpu/indexing_kernels.h"
#include "server/backends/gpu/launch.h"
#include "server/backends/gpu/layout_kernels.h"
#include "server/backends/gpu/linalg_kernels.h"
#include "server/backends/gpu/loss_kernels.h"
#include "server/backends/gpu/norm_kernels.h"
#include "server/backends/gpu/optimizer_kernels.h"
#include "server/backends/gpu/pool_kernels.h"
#include "server/backends/gpu/reduction_kernels.h"
#include "server/backends/gpu/resample_kernels.h"
#include "server/backends/gpu/select_kernels.h"
#include "server/backends/gpu/sort_kernels.h"
#include "server/core/status.h"
#include "server/ops/elementwise.h"
#include "server/ops/shape_ops.h"

namespace tensord::gpu {
namespace {

using gpu::ComputeIn;

const std::set<std::string>& FillOps() {
  static const auto* s =
      new std::set<std::string>{"zeros", "ones", "full", "zeros_like", "ones_like", "full_like"};
  return *s;
}
const std::set<std::string>& ViewOps() {
  static const auto* s =
      new std::set<std::string>{"reshape", "flatten", "squeeze", "unsqueeze", "detach"};
  return *s;
}
const std::set<std::string>& CopyOps() {
  static const auto* s = new std::set<std::string>{"permute", "transpose", "expand", "contiguous",
                                                   "clone",   "to_dtype",  "assign"};
  return *s;
}
// The compute dtype of an elementwise call and its expression, or nullopt.
struct ElementwisePlan {
  gpu::ElementwiseExpr expr;
  DType compute;
};
std::optional<ElementwisePlan> PlanElementwise(const std::string& op, const Attrs& attrs,
                                               DType first_input, DType output) {
  for (DType compute : {output, first_input}) {
    std::optional<gpu::ElementwiseExpr> e = gpu::FindElementwise(op, attrs, compute);
    if (!e) continue;
    const DType want = e->compute == ComputeIn::kOutput ? output : first_input;
    if (want != compute) continue;
    return ElementwisePlan{*e, compute};
  }
  return std::nullopt;
}

std::vector<int64_t> PermutedStrides(const Tensor& x, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> in = ContiguousStrides(x.shape());
  std::vector<int64_t> out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = in[perm[i]];
  return out;
}

absl::StatusOr<std::vector<int64_t>> Permutation(const KernelCall& c) {
  const Tensor& x = c.inputs[0];
  if (c.op.name == "permute") {
    return ops::NormalizePermutation("permute", c.attrs.GetInts("dims"), x.rank());
  }
  return ops::TransposePermutation(c.attrs, x.rank());
}

absl::Status RunCopy(KernelCall& c, DeviceRuntime& device) {
  const std::string& op = c.op.name;
  if (op == "assign") {
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
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  if (op == "permute" || op == "transpose") {
    ASSIGN_OR_RETURN(std::vector<int64_t> perm, Permutation(c));
    return Copy(device, "permute", x, PermutedStrides(x, perm), out);
  }
  if (op == "expand") return Copy(device, op, x, BroadcastStrides(x.shape(), out.shape()), out);
  return Copy(device, op == "to_dtype" ? "cast" : "copy", x, ContiguousStrides(x.shape()), out);
}

absl::Status RunFill(KernelCall& c, DeviceRuntime& device) {
  const std::string& op = c.op.name;
  const double value = op.rfind("zeros", 0) == 0  ? 0.0
                       : op.rfind("ones", 0) == 0 ? 1.0
                                                  : c.attrs.GetFloat("value");
  return Fill(device, value, c.outputs[0]);
}

bool HasStorageOnly(absl::Span<const DType> dtypes) {
  for (DType d : dtypes) {
    if (IsStorageOnly(d)) return true;
  }
  return false;
}

}  // namespace

bool Implements(const OpDef& op) {
  return gpu::HasElementwise(op.name) || FillOps().count(op.name) || ViewOps().count(op.name) ||
         CopyOps().count(op.name) || IsLayoutKernelOp(op.name) || IsIndexingOp(op.name) ||
         IsGroupOp(op.name) || IsNormOp(op.name) || IsConvOp(op.name) || IsPoolOp(op.name) ||
         IsComputedCreationOp(op.name) || IsPointwiseLossOp(op.name) || IsSortOp(op.name) ||
         IsDimActivation(op.name) || IsResampleOp(op.name) || IsCrossEntropyOp(op.name) ||
         IsProduct(op.name) || IsOptimizer(op.name) || IsSelectOp(op.name);
}

bool Supports(const KernelQuery& q, const DeviceRuntime& device) {
  const std::string& op = q.op.name;
  if (!Implements(q.op)) return false;
  if (!device.has_fp64()) {
    for (DType d : q.dtypes) {
      if (d == DType::kF64) return false;
    }
    for (const TensorMeta& m : q.outputs) {
      if (m.dtype == DType::kF64) return false;  // sum(x, dtype=f64)
    }
  }
  // The computed creation ops draw and step in double, as the CPU does (a float stream would
  // give other numbers). Group kernels, norms and losses accumulate in WIDE: double, or float
  // with compensated sums on a device without fp64.
  if (IsComputedCreationOp(op) && !device.has_fp64()) return false;
  // Storage ops move the bits of storage dtypes as they are; the others see f32 or i32 (the
  // dispatcher converts). The selections move bits too (nonzero compares them through the
  // dialect's loads).
  const bool storage_op = FillOps().count(op) || ViewOps().count(op) || CopyOps().count(op) ||
                          MovesBits(op) || ReadsThroughIndex(op) || IsSelectOp(op);
  if (!storage_op && HasStorageOnly(q.dtypes)) return false;
  if (q.attrs == nullptr || (q.inputs.empty() && !q.op.creation)) return true;
  if (storage_op) return true;
  if (IsLayoutKernelOp(op) || IsIndexingOp(op) || IsGroupOp(op) || IsNormOp(op) || IsConvOp(op) ||
      IsPoolOp(op) || IsComputedCreationOp(op) || IsPointwiseLossOp(op) || IsSortOp(op) ||
      IsDimActivation(op) || IsResampleOp(op) || IsCrossEntropyOp(op) || IsOptimizer(op)) {
    return true;
  }
  if (IsProduct(op)) return SupportsProduct(q);
  if (q.outputs.empty()) return false;
  const std::optional<ElementwisePlan> plan =
      PlanElementwise(op, *q.attrs, q.inputs[0].dtype, q.outputs[0].dtype);
  // Helpers may compute in double.
  return plan.has_value() && (plan->expr.helpers.empty() || device.has_fp64());
}

absl::Status Run(KernelCall& c, DeviceRuntime& device) {
  const std::string& op = c.op.name;
  if (ViewOps().count(op)) {
    c.outputs[0] = c.inputs[0].Reshaped(c.output_metas[0].shape);
    return absl::OkStatus();
  }
  if (FillOps().count(op)) return RunFill(c, device);
  if (CopyOps().count(op)) return RunCopy(c, device);
  if (IsLayoutKernelOp(op)) return RunLayout(c, device);
  if (IsIndexingOp(op)) return RunIndexing(c, device);
  if (IsGroupOp(op)) return RunGroup(c, device);
  if (IsNormOp(op)) return RunNorm(c, device);
  if (IsConvOp(op)) return RunConv(c, device);
  if (IsPoolOp(op)) return RunPool(c, device);
  if (IsComputedCreationOp(op)) return RunComputedCreation(c, device);
  if (IsPointwiseLossOp(op)) return RunPointwiseLoss(c, device);
  if (IsSortOp(op)) return RunSort(c, device);
  if (IsDimActivation(op)) return RunDimActivation(c, device);
  if (IsResampleOp(op)) return RunResample(c, device);
  if (IsCrossEntropyOp(op)) return RunCrossEntropy(c, device);
  if (IsProduct(op)) return RunProduct(c, device);
  if (IsOptimizer(op)) return RunOptimizer(c, device);
  if (IsSelectOp(op)) return RunSelect(c, device);
  std::optional<ElementwisePlan> plan =
      PlanElementwise(op, c.attrs, c.inputs[0].dtype(), c.outputs[0].dtype());
  if (!plan) {
    return Error(Reason::kUnsupportedOnBackend,
                 absl::StrCat(device.name(), ": no kernel for ", op, " on these dtypes"),
                 {{"op", op}, {"backend", device.kind()}, {"device", device.name()}});
  }
  // An integer division or modulo checks its whole divisor first, as the CPU does.
  const bool divides =
      (op == "div" && c.attrs.Has("rounding_mode")) || op == "fmod" || op == "remainder";
  if (divides && IsInt(plan->compute)) {
    ASSIGN_OR_RETURN(bool zero, AnyZero(device, c.inputs[1]));
    if (zero) {
      return ops::IntegerDivisionByZero(op, op == "div" ? c.attrs.GetString("rounding_mode") : "");
    }
  }
  std::vector<Shape> shapes;
  for (const Tensor& t : c.inputs) shapes.push_back(t.shape());
  gpu::Geometry g = gpu::BroadcastGeometry(c.outputs[0].shape(), shapes);
  std::vector<Tensor> inputs(c.inputs.begin(), c.inputs.end());
  return LaunchMap(device, op, plan->expr, plan->compute, inputs, g, c.outputs[0]);
}

}  // namespace tensord::gpu
