// The 2-d pools (max_pool2d, avg_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d) and their
// gradients on a GPU device: the windows of ops/nn_pool_windows.h run by the kernels of
// gpu/pool_source.h.
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/pool_source.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/core/status.h"
#include "server/ops/nn_pool_windows.h"

namespace tensord::gpu {
namespace {

// For every input position of a plane, the output positions whose windows hold it, ascending.
std::vector<int64_t> WindowLists(const std::vector<nn::PoolWindow>& windows, int64_t height,
                                 int64_t width) {
  std::vector<std::vector<int64_t>> lists(height * width);
  for (size_t o = 0; o < windows.size(); ++o) {
    const nn::PoolWindow& w = windows[o];
    for (int64_t ih = w.hs; ih < w.he; ih += w.dh) {
      for (int64_t iw = w.ws; iw < w.we; iw += w.dw) {
        lists[ih * width + iw].push_back(static_cast<int64_t>(o));
      }
    }
  }
  std::vector<int64_t> table(lists.size() + 1);
  for (size_t p = 0; p < lists.size(); ++p) {
    table[p] = static_cast<int64_t>(table.size());
    table.insert(table.end(), lists[p].begin(), lists[p].end());
  }
  table[lists.size()] = static_cast<int64_t>(table.size());
  return table;
}

absl::Status RunPool(KernelCall& c, DeviceRuntime& device, bool max, bool backward) {
  const std::string& op = c.op.name;
  Tensor& out = c.outputs[0];
  if (out.numel() == 0) return absl::OkStatus();
  const nn::Nchw x = nn::AsNchw(backward ? c.inputs[1].shape() : c.inputs[0].shape());
  const nn::Nchw y = nn::AsNchw(backward ? c.inputs[0].shape() : out.shape());
  ASSIGN_OR_RETURN(std::vector<nn::PoolWindow> windows, nn::PoolWindows(op, c.attrs, x, y));
  std::vector<int64_t> flat;
  for (const nn::PoolWindow& w : windows)
    flat.insert(flat.end(), {w.hs, w.he, w.ws, w.we, w.divisor});
  const int64_t dh = windows.empty() ? 1 : windows[0].dh, dw = windows.empty() ? 1 : windows[0].dw;
  const bool indices = !backward && c.outputs.size() > 1;
  const std::string name =
      absl::StrCat("td_pool2d_", max ? "max" : "avg", backward ? "_backward_" : "_",
                   DTypeName(out.dtype()), indices ? "_indices" : "");
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderPool2d(dialect, name, out.dtype(), max, backward,
                                                       indices);
                            }};
  ASSIGN_OR_RETURN(Operand win_arg, Operand::Constants(device, flat));
  std::vector<Operand> operands;
  for (const Tensor& t : c.inputs) {
    if (backward && !max && operands.size() == 1) break;  // avg's gradient needs no input
    ASSIGN_OR_RETURN(Operand o, Operand::Of(t, device));
    operands.push_back(std::move(o));
  }
  std::vector<Operand> outs;
  for (size_t k = 0; k < (indices ? 2u : 1u); ++k) {
    ASSIGN_OR_RETURN(Operand o, Operand::Of(c.outputs[k], device));
    outs.push_back(std::move(o));
  }
  std::optional<Operand> lists_arg;
  if (backward) {
    ASSIGN_OR_RETURN(Operand lists, Operand::Constants(device, WindowLists(windows, x.h, x.w)));
    lists_arg.emplace(std::move(lists));
  }
  Launch launch(kernel, out.numel());
  Args& args = launch.args;
  for (const Operand& o : outs) args.AddMem(o);
  for (const Operand& o : operands) args.AddMem(o);
  args.AddMem(win_arg);
  if (lists_arg) args.AddMem(*lists_arg);
  args.Add(static_cast<int64_t>(out.numel()))
      .Add(static_cast<int64_t>(y.h * y.w))
      .Add(static_cast<int64_t>(x.w))
      .Add(static_cast<int64_t>(x.h * x.w))
      .Add(static_cast<int64_t>(dh))
      .Add(static_cast<int64_t>(dw));
  return Enqueue(device, launch);
}

}  // namespace

void RegisterPoolKernels(GpuKernelTable& t) {
  for (const auto& [op, max] :
       {std::pair{"max_pool2d", true}, std::pair{"avg_pool2d", false},
        std::pair{"adaptive_max_pool2d", true}, std::pair{"adaptive_avg_pool2d", false}}) {
    t.Add(op, KernelOf(RunPool, max, false));
    t.Add(absl::StrCat(op, "_backward"), KernelOf(RunPool, max, true));
  }
}

}  // namespace tensord::gpu
