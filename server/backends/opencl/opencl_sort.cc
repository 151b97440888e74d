#include "server/backends/opencl/opencl_sort.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/sort_source.h"
#include "server/backends/opencl/opencl_elementwise.h"
#include "server/core/status.h"
#include "server/ops/shape_ops.h"

namespace tensord::opencl {

bool IsSortOp(const std::string& op) { return op == "sort" || op == "argsort" || op == "topk"; }

absl::Status RunSort(KernelCall& c, ClDevice& device) {
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
  ASSIGN_OR_RETURN(BuiltKernel * built, device.Kernel(name, name, [&] {
    return gpu::RenderRankSort(gpu::OpenClDialect(), name, x.dtype(), values);
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
        .Add(static_cast<cl_long>(x.numel()))
        .Add(static_cast<cl_long>(outer))
        .Add(static_cast<cl_long>(size))
        .Add(static_cast<cl_long>(inner))
        .Add(static_cast<cl_long>(k))
        .Add(static_cast<cl_int>(descending));
  });
}

}  // namespace tensord::opencl
