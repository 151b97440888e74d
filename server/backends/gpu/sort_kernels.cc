#include "server/backends/gpu/sort_kernels.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/sort_source.h"
#include "server/backends/gpu/launch.h"
#include "server/core/status.h"
#include "server/ops/shape_ops.h"

namespace tensord::gpu {

bool IsSortOp(const std::string& op) { return op == "sort" || op == "argsort" || op == "topk"; }

absl::Status RunSort(KernelCall& c, DeviceRuntime& device) {
  const std::string& op = c.op.name;
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim(op, "dim", c.attrs.GetInt("dim"), x.rank()));
  int64_t outer = 1, size = 1, inner = 1;
  for (int64_t d = 0; d < x.rank(); ++d) (d < dim ? outer : d == dim ? size : inner) *= x.dim(d);
  int64_t k = op == "topk" ? c.attrs.GetInt("k") : size;
  if (x.numel() == 0 || k == 0) {
    // torch.topk of a 0-d tensor returns it whatever k is (k may be 0 or 1 there).
    if (x.rank() != 0) return absl::OkStatus();
    k = 1;
  }
  const bool values = op != "argsort";
  const bool descending = c.attrs.GetBool(op == "topk" ? "largest" : "descending");
  const std::string name =
      absl::StrCat("td_rank_sort_", DTypeName(x.dtype()), values ? "" : "_indices");
  ASSIGN_OR_RETURN(CompiledKernel * built, device.Kernel(name, name, [&] {
    return gpu::RenderRankSort(device.dialect(), name, x.dtype(), values);
  }));
  std::vector<Operand> outs;
  for (Tensor& t : c.outputs) {
    ASSIGN_OR_RETURN(Operand o, Operand::Of(t, device));
    outs.push_back(std::move(o));
  }
  ASSIGN_OR_RETURN(Operand x_arg, Operand::Of(x, device));
  return SetAndLaunch(device, built, name, x.numel(), [&](Args& args) {
    for (const Operand& o : outs) args.AddMem(o);
    args.AddMem(x_arg)
        .Add(static_cast<int64_t>(x.numel()))
        .Add(static_cast<int64_t>(outer))
        .Add(static_cast<int64_t>(size))
        .Add(static_cast<int64_t>(inner))
        .Add(static_cast<int64_t>(k))
        .Add(static_cast<int32_t>(descending));
  });
}

}  // namespace tensord::gpu
