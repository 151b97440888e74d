// upsample (interpolate's internal op) and its gradient on a GPU device: the taps of
// ops/nn_resample_taps.h run by the kernels of gpu/resample_source.h.
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/resample_source.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/core/status.h"
#include "server/ops/nn_resample_taps.h"

namespace tensord::gpu {
namespace {

// The taps of every dim (d, h, w) as two flat tables: source indices and weights, two per
// output index; and, for the gradient, per dim and input index, the entries (2 * output
// index + tap, within the dim's part of the tables) that read it, ascending.
template <typename T>
struct FlatTaps {
  std::vector<int64_t> idx;
  std::vector<T> wts;
  std::vector<int64_t> lists;
  int64_t list_base[3] = {0, 0, 0};
};

template <typename T>
FlatTaps<T> Flatten(const nn::ResamplePlan<T>& p) {
  FlatTaps<T> f;
  for (int k = 0; k < 3; ++k) {
    const nn::Taps<T>& t = p.taps[k];
    for (int64_t o = 0; o < p.g.out[k]; ++o) {
      f.idx.insert(f.idx.end(), {t.i0[o], t.i1[o]});
      f.wts.insert(f.wts.end(), {t.w0[o], t.w1[o]});
    }
  }
  for (int k = 0; k < 3; ++k) {
    std::vector<std::vector<int64_t>> by_input(p.g.in[k]);
    const nn::Taps<T>& t = p.taps[k];
    for (int64_t o = 0; o < p.g.out[k]; ++o) {
      for (int tap = 0; tap < p.ntaps; ++tap) {
        by_input[tap ? t.i1[o] : t.i0[o]].push_back(2 * o + tap);
      }
    }
    f.list_base[k] = static_cast<int64_t>(f.lists.size());
    const size_t starts = f.lists.size();
    f.lists.resize(starts + by_input.size() + 1);
    for (size_t i = 0; i < by_input.size(); ++i) {
      f.lists[starts + i] = static_cast<int64_t>(f.lists.size());
      f.lists.insert(f.lists.end(), by_input[i].begin(), by_input[i].end());
    }
    f.lists[starts + by_input.size()] = static_cast<int64_t>(f.lists.size());
  }
  return f;
}

template <typename T>
absl::Status LaunchUpsample(KernelCall& c, DeviceRuntime& device, bool backward) {
  const Tensor& in = c.inputs[0];
  Tensor& out = c.outputs[0];
  // The taps map the forward's input shape to its output shape.
  const nn::ResamplePlan<T> p = nn::MakeResamplePlan<T>(
      backward ? out.shape() : in.shape(), backward ? in.shape() : out.shape(), c.attrs);
  const FlatTaps<T> f = Flatten(p);
  const std::string name =
      absl::StrCat("td_upsample_", backward ? "backward_" : "", DTypeName(out.dtype()));
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderUpsample(dialect, name, out.dtype(), backward);
                            }};
  std::vector<int64_t> geom = {p.g.in[0], p.g.in[1], p.g.in[2], p.g.out[0], p.g.out[1], p.g.out[2]};
  if (backward) {
    geom.insert(geom.end(), f.list_base, f.list_base + 3);
  } else {
    geom.push_back(p.ntaps);
  }
  ASSIGN_OR_RETURN(Operand geom_arg, Operand::Constants(device, geom));
  ASSIGN_OR_RETURN(Operand table_arg, Operand::Constants(device, backward ? f.lists : f.idx));
  // The weights, in the dtype, through a host tensor.
  Tensor w = Tensor::FromVector<T>(f.wts, {static_cast<int64_t>(f.wts.size())});
  ASSIGN_OR_RETURN(Operand wts_arg, Operand::Of(w, device));
  ASSIGN_OR_RETURN(Operand in_arg, Operand::Of(in, device));
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  Launch launch(kernel, out.numel());
  Args& args = launch.args;
  args.AddMem(out_arg).AddMem(in_arg);
  if (!backward) args.AddMem(table_arg);
  args.AddMem(wts_arg);
  if (backward) args.AddMem(table_arg);
  args.AddMem(geom_arg).Add(static_cast<int64_t>(out.numel()));
  return Enqueue(device, launch);
}

absl::Status RunResample(KernelCall& c, DeviceRuntime& device, bool backward) {
  if (c.outputs[0].numel() == 0) return absl::OkStatus();
  if (c.outputs[0].dtype() == DType::kF32) return LaunchUpsample<float>(c, device, backward);
  return LaunchUpsample<double>(c, device, backward);
}

}  // namespace

void RegisterResampleKernels(GpuKernelTable& t) {
  t.Add("upsample", KernelOf(RunResample, false));
  t.Add("upsample_backward", KernelOf(RunResample, true));
}

}  // namespace tensord::gpu
