// sort, argsort and topk on a GPU device: the rank sort of gpu/sort_source.h.
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/sort_source.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/core/status.h"
#include "server/ops/shape_ops.h"

namespace tensord::gpu {

namespace {

// Lines up to this long are rank sorted (one launch, every pair compared); longer ones merge
// sorted (log2(size) launches of a binary search per element).
constexpr int64_t kRankSortUpTo = 256;

// Sorts every line of `x` ([outer, size, inner] along the sorted dim) with the merge passes of
// sort_source.h and writes the first k of each to the outputs ([values,] indices).
absl::Status MergeSort(KernelCall& c, DeviceRuntime& device, const Tensor& x, int64_t size,
                       int64_t inner, int64_t k, bool values, bool descending) {
  const DType dtype = x.dtype();
  const int64_t n = x.numel();
  // Two pairs of keys and indices, charged to the session: the passes go back and forth.
  std::vector<Tensor> temp;
  for (DType t : {dtype, DType::kI64, dtype, DType::kI64}) {
    ASSIGN_OR_RETURN(Tensor b,
                     Tensor::EmptyOn(device.shared_from_this(), t, {n}, x.device(), c.account));
    temp.push_back(std::move(b));
  }
  std::vector<Operand> bufs;
  for (const Tensor& t : temp) {
    ASSIGN_OR_RETURN(Operand o, Operand::Of(t, device));
    bufs.push_back(std::move(o));
  }
  const std::string type(DTypeName(dtype));
  const std::string gather = absl::StrCat("td_sort_gather_", type);
  const KernelSource gather_k{gather, gather, [&](const Dialect& dialect) {
                                return gpu::RenderSortGather(dialect, gather, dtype);
                              }};
  ASSIGN_OR_RETURN(Operand x_arg, Operand::Of(x, device));
  {
    Launch launch(gather_k, n);
    Args& args = launch.args;
    args.AddMem(bufs[0]).AddMem(bufs[1]).AddMem(x_arg).Add(n).Add(size).Add(inner);
    RETURN_IF_ERROR(Enqueue(device, launch));
  }
  const std::string pass = absl::StrCat("td_merge_pass_", type);
  const KernelSource pass_k{pass, pass, [&](const Dialect& dialect) {
                              return gpu::RenderMergePass(dialect, pass, dtype);
                            }};
  int from = 0;  // the pair (bufs[from], bufs[from + 1]) holds the runs
  for (int64_t width = 1; width < size; width *= 2) {
    const int to = 2 - from;
    {
      Launch launch(pass_k, n);
      Args& args = launch.args;
      args.AddMem(bufs[to])
          .AddMem(bufs[to + 1])
          .AddMem(bufs[from])
          .AddMem(bufs[from + 1])
          .Add(n)
          .Add(size)
          .Add(width)
          .Add(static_cast<int32_t>(descending));
      RETURN_IF_ERROR(Enqueue(device, launch));
    }
    from = to;
  }
  const std::string scatter = absl::StrCat("td_sort_scatter_", type, values ? "" : "_indices");
  const KernelSource scatter_k{scatter, scatter, [&](const Dialect& dialect) {
                                 return gpu::RenderSortScatter(dialect, scatter, dtype, values);
                               }};
  std::vector<Operand> outs;
  for (Tensor& t : c.outputs) {
    ASSIGN_OR_RETURN(Operand o, Operand::Of(t, device));
    outs.push_back(std::move(o));
  }
  const int64_t n_out = n / size * k;
  Launch launch(scatter_k, n_out);
  Args& args = launch.args;
  for (const Operand& o : outs) args.AddMem(o);
  args.AddMem(bufs[from]).AddMem(bufs[from + 1]).Add(n_out).Add(size).Add(inner).Add(k);
  return Enqueue(device, launch);
}

// What a sorting op returns and how it is told its order (bound at registration).
enum class Sorted { kSort, kArgsort, kTopk };

absl::Status RunSort(KernelCall& c, DeviceRuntime& device, Sorted what) {
  const std::string& op = c.op.name;
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim(op, "dim", c.attrs.GetInt("dim"), x.rank()));
  int64_t outer = 1, size = 1, inner = 1;
  for (int64_t d = 0; d < x.rank(); ++d) (d < dim ? outer : d == dim ? size : inner) *= x.dim(d);
  int64_t k = what == Sorted::kTopk ? c.attrs.GetInt("k") : size;
  if (x.numel() == 0 || k == 0) {
    // torch.topk of a 0-d tensor returns it whatever k is (k may be 0 or 1 there).
    if (x.rank() != 0) return absl::OkStatus();
    k = 1;
  }
  const bool values = what != Sorted::kArgsort;
  const bool descending = c.attrs.GetBool(what == Sorted::kTopk ? "largest" : "descending");
  if (size > kRankSortUpTo) return MergeSort(c, device, x, size, inner, k, values, descending);
  const std::string name =
      absl::StrCat("td_rank_sort_", DTypeName(x.dtype()), values ? "" : "_indices");
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderRankSort(dialect, name, x.dtype(), values);
                            }};
  std::vector<Operand> outs;
  for (Tensor& t : c.outputs) {
    ASSIGN_OR_RETURN(Operand o, Operand::Of(t, device));
    outs.push_back(std::move(o));
  }
  ASSIGN_OR_RETURN(Operand x_arg, Operand::Of(x, device));
  Launch launch(kernel, x.numel());
  Args& args = launch.args;
  for (const Operand& o : outs) args.AddMem(o);
  args.AddMem(x_arg)
      .Add(static_cast<int64_t>(x.numel()))
      .Add(static_cast<int64_t>(outer))
      .Add(static_cast<int64_t>(size))
      .Add(static_cast<int64_t>(inner))
      .Add(static_cast<int64_t>(k))
      .Add(static_cast<int32_t>(descending));
  return Enqueue(device, launch);
}

}  // namespace

void RegisterSortKernels(GpuKernelTable& t) {
  t.Add("sort", KernelOf(RunSort, Sorted::kSort));
  t.Add("argsort", KernelOf(RunSort, Sorted::kArgsort));
  t.Add("topk", KernelOf(RunSort, Sorted::kTopk));
}

}  // namespace tensord::gpu
