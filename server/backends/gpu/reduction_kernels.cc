#include "server/backends/gpu/reduction_kernels.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/reduction_exprs.h"
#include "server/backends/gpu/codegen/reduction_source.h"
#include "server/backends/gpu/codegen/tree_reduction_source.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/ops/registry.h"

namespace tensord::gpu {
namespace {

// The work-group size of tree reductions on `device`: 256, or its largest power of two below.
int TreeSize(const DeviceRuntime& device) {
  int size = 256;
  while (size > device.max_group_size()) size /= 2;
  return size;
}

// Groups of `n_red` elements, from 256 on, go to a work group each on devices that want trees
// (DeviceRuntime::tree_reductions): a tree reduction (tree_reduction_source.h) or a cooperative
// plan's group kernel. The group has a quarter of the elements in items, 32 to TreeSize (a row
// of 256 to 64 items, of 1,024 and more to 256): one work item walking a row of a few hundred
// elements reads memory no neighbour reads. 0: one work item a group.
int WorkGroupFor(const DeviceRuntime& device, int64_t n_red) {
  if (n_red < 256 || !device.tree_reductions()) return 0;
  int size = TreeSize(device);
  while (size > 32 && size * 4 > n_red) size /= 2;
  return size >= 32 ? size : 0;
}

}  // namespace

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
  const int64_t n_red = NumElements(g.reduced.shape);
  for (int w : plan.walked) k.walked.push_back(inputs[w].dtype());
  for (int i : plan.groups) k.groups.push_back(inputs[i].dtype());
  for (int i : plan.tables) k.tables.push_back(inputs[i].dtype());
  std::vector<DType> key = k.walked;
  key.insert(key.end(), k.groups.begin(), k.groups.end());
  key.insert(key.end(), k.tables.begin(), k.tables.end());
  key.push_back(k.output);
  key.push_back(k.compute);
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
  // A cooperative plan's long groups on a work group each where its kernel runs on groups
  // that large; otherwise one work item a group.
  for (int size = plan.cooperative ? WorkGroupFor(device, n_red) : 0;; size = 0) {
    k.group_size = size;
    k.name = KernelName(op, key);
    if (size > 0) absl::StrAppend(&k.name, "_wg", size);
    // The name holds op, dtypes and work-group size; the body tells apart an op's attribute
    // forms (norm's p).
    Launch launch({absl::StrCat(k.name, "|", k.indices, "|", k.body), k.name,
                   [&k](const Dialect& dialect) { return gpu::RenderGroup(dialect, k); }},
                  size > 0 ? n_groups * size : n_groups, size);
    for (const Operand& o : operands) launch.args.AddMem(o);
    launch.args.AddMem(geometry_arg)
        .Add(static_cast<int64_t>(n_groups))
        .Add(static_cast<int32_t>(g.kept.shape.size()))
        .Add(static_cast<int32_t>(g.reduced.shape.size()))
        .Add(static_cast<int64_t>(n_red))
        .AddWide(device, plan.scalar);
    if (size == 0) return Enqueue(device, launch);
    ASSIGN_OR_RETURN(bool ran, EnqueueIfGroupsFit(device, launch));
    if (ran) return absl::OkStatus();
  }
}

namespace {

// The plain fold of a plan with one walked input and nothing else, or nullopt.
std::optional<TreeFold> TreeFoldOf(std::optional<TreeFold> fold, const GroupPlan& plan) {
  if (plan.walked.size() != 1 || !plan.groups.empty() || !plan.tables.empty() || plan.indices) {
    return std::nullopt;
  }
  return fold;
}

// The slices each group is cut into for a first launch of partials: a few long groups (a full
// reduction, a loss's sum over a batch) would leave most of a GPU idle as a work group each, so
// fewer than 256 groups are cut into slices of at least 8 work groups' worth of elements, up
// to about 1,024 work groups in all. 1: each group on one work group, no second launch.
int64_t SlicesFor(int64_t n_groups, int64_t n_red, int size) {
  constexpr int64_t kFillGroups = 1024;
  if (n_groups * 4 >= kFillGroups) return 1;
  return std::max<int64_t>(1, std::min(n_red / (8 * int64_t{size}), kFillGroups / n_groups));
}

// Enqueues tree kernel `k` folding `x` (its reduction geometry `g`) into `out`, each group cut
// into `slices` slices (the kernel's arguments, tree_reduction_source.h); false, nothing
// enqueued, when the kernel does not run on work groups of k.size.
absl::StatusOr<bool> EnqueueTree(DeviceRuntime& device, const TreeReduceKernel& k,
                                 const ReductionGeometry& g, const Operand& x, const Operand& out,
                                 int64_t slices, int64_t count) {
  const int64_t n_groups = NumElements(g.kept.shape);
  const int64_t n_red = NumElements(g.reduced.shape);
  // Each slice a whole number of the work group's strides, the last one taking the rest.
  const int64_t chunk = n_red / slices / k.size * k.size;
  Launch launch(
      {k.name, k.name, [&k](const Dialect& dialect) { return RenderTreeReduce(dialect, k); }},
      n_groups * slices * k.size, k.size);
  std::vector<int64_t> flat = g.kept.Flat();
  const std::vector<int64_t> reduced = g.reduced.Flat();
  flat.insert(flat.end(), reduced.begin(), reduced.end());
  ASSIGN_OR_RETURN(Operand geometry_arg, Operand::Constants(device, flat));
  launch.args.AddMem(out)
      .AddMem(x)
      .AddMem(geometry_arg)
      .Add(n_groups)
      .Add(static_cast<int32_t>(g.kept.shape.size()))
      .Add(static_cast<int32_t>(g.reduced.shape.size()))
      .Add(n_red)
      .Add(slices)
      .Add(chunk)
      .Add(count);
  return EnqueueIfGroupsFit(device, launch);
}

// Runs `plan` (a fold of TreeFoldOf) as a tree reduction when its groups are long; false when
// they are not (the group kernel runs it). Few groups fold in two launches: slices of each
// into partials (sums in WIDE, int sums in int64, extrema in the compute type), then each
// group's partials.
absl::StatusOr<bool> LaunchTree(DeviceRuntime& device, const std::string& op, TreeFold fold,
                                const GroupPlan& plan, const Tensor& x, Tensor& out) {
  const gpu::ReductionGeometry g = gpu::ReduceGeometry(x.shape(), plan.dims);
  const int64_t n_groups = NumElements(g.kept.shape);
  const int64_t n_red = NumElements(g.reduced.shape);
  const int size = WorkGroupFor(device, n_red);
  if (size == 0) return false;
  if (n_groups == 0 || out.numel() == 0) return true;
  auto kernel = [&op](TreeFold fold, DType input, DType compute, DType output, int size,
                      bool partial) {
    TreeReduceKernel k;
    k.fold = fold;
    k.input = input;
    k.compute = compute;
    k.output = output;
    k.size = size;
    k.partial = partial;
    k.name = absl::StrCat(
        KernelName(absl::StrCat(op, partial ? "_part" : "_tree"), {input, output, compute}), "_",
        size);
    return k;
  };
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  ASSIGN_OR_RETURN(Operand x_arg, Operand::Of(x, device));
  const int64_t slices = SlicesFor(n_groups, n_red, size);
  if (slices == 1) {
    return EnqueueTree(device,
                       kernel(fold, x.dtype(), plan.compute, out.dtype(), size, /*partial=*/false),
                       g, x_arg, out_arg, 1, n_red);
  }
  const bool sums = fold == TreeFold::kSum || fold == TreeFold::kMean;
  const DType wide = device.has_fp64() ? DType::kF64 : DType::kF32;
  const DType partial = !sums ? plan.compute : (IsFloat(plan.compute) ? wide : DType::kI64);
  ASSIGN_OR_RETURN(Operand partials,
                   Operand::Block(device, n_groups * slices * DTypeSize(partial)));
  ASSIGN_OR_RETURN(
      bool sliced,
      EnqueueTree(device, kernel(fold, x.dtype(), plan.compute, partial, size, /*partial=*/true), g,
                  x_arg, partials, slices, n_red));
  if (!sliced) return false;
  // The partials of a group, a row of `slices`, folded by the largest work group they fill
  // and the kernel runs on (one item at the least).
  int second = TreeSize(device);
  while (second > slices) second /= 2;
  const ReductionGeometry rows = ReduceGeometry(Shape{n_groups, slices}, {1});
  for (;; second /= 2) {
    if (second == 0) return Error(Reason::kInternal, absl::StrCat(op, ": no work group fits"));
    ASSIGN_OR_RETURN(
        bool ran,
        EnqueueTree(device, kernel(fold, partial, partial, out.dtype(), second, /*partial=*/false),
                    rows, partials, out_arg, 1, n_red));
    if (ran) return true;
  }
}

// A group op; `fold` is its fold as a tree reduction, for the calls that can run as one.
absl::Status RunGroup(KernelCall& c, DeviceRuntime& device, std::optional<TreeFold> fold) {
  std::vector<int64_t> ranks;
  std::vector<DType> dtypes;
  for (const Tensor& t : c.inputs) {
    ranks.push_back(t.rank());
    dtypes.push_back(t.dtype());
  }
  ASSIGN_OR_RETURN(gpu::GroupPlan plan,
                   gpu::PlanGroup(c.op.name, c.attrs, ranks, dtypes, c.outputs[0].dtype()));
  const std::vector<Tensor> inputs(c.inputs.begin(), c.inputs.end());
  if (std::optional<TreeFold> tree = TreeFoldOf(fold, plan)) {
    ASSIGN_OR_RETURN(
        bool ran, LaunchTree(device, c.op.name, *tree, plan, inputs[plan.walked[0]], c.outputs[0]));
    if (ran) return absl::OkStatus();
  }
  return LaunchGroup(device, c.op.name, plan, inputs, c.outputs[0],
                     plan.indices ? &c.outputs[1] : nullptr);
}

}  // namespace

void RegisterReductionKernels(GpuKernelTable& t) {
  // The plain folds first, with their tree form; then every other op of the group templates.
  for (const auto& [op, fold] :
       {std::pair{"sum", TreeFold::kSum}, std::pair{"mean", TreeFold::kMean},
        std::pair{"amax", TreeFold::kMax}, std::pair{"max", TreeFold::kMax},
        std::pair{"amin", TreeFold::kMin}, std::pair{"min", TreeFold::kMin}}) {
    t.Add(op, KernelOf(RunGroup, std::optional<TreeFold>(fold)));
  }
  for (const OpDef* op : OpRegistry::Builtin().All()) {
    if (gpu::HasGroup(op->name) && t.Find(*op) == nullptr) {
      t.Add(op->name, KernelOf(RunGroup, std::optional<TreeFold>()));
    }
  }
}

}  // namespace tensord::gpu
