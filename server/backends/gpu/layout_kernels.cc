#include "server/backends/gpu/layout_kernels.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/layout_source.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/ops/layout_plan.h"
#include "server/ops/registry.h"
#include "server/ops/shape_ops.h"

namespace tensord::gpu {
namespace {

absl::Status RunPlan(KernelCall& c, DeviceRuntime& device) {
  std::vector<Shape> in, out;
  for (const Tensor& t : c.inputs) in.push_back(t.shape());
  for (const Tensor& t : c.outputs) out.push_back(t.shape());
  ASSIGN_OR_RETURN(ops::LayoutPlan plan, ops::PlanLayout(c.op.name, in, out, c.attrs));
  if (plan.zero_outputs) {
    for (Tensor& t : c.outputs) RETURN_IF_ERROR(Fill(device, 0.0, t));
  }
  for (const ops::WindowCopy& w : plan.copies) {
    RETURN_IF_ERROR(CopyWindow(device, c.inputs[w.input], c.outputs[w.output], w));
  }
  return absl::OkStatus();
}

absl::Status RunTriangle(KernelCall& c, DeviceRuntime& device, bool lower) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  if (x.numel() == 0) return absl::OkStatus();
  const std::string name = absl::StrCat("td_triangle_", gpu::StorageTag(x.dtype()));
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderTriangle(dialect, name, x.dtype());
                            }};
  ASSIGN_OR_RETURN(Operand in_arg, Operand::Of(x, device));
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  Launch launch(kernel, x.numel());
  Args& args = launch.args;
  args.AddMem(out_arg)
      .AddMem(in_arg)
      .Add(static_cast<int64_t>(x.numel()))
      .Add(static_cast<int64_t>(x.dim(x.rank() - 2)))
      .Add(static_cast<int64_t>(x.dim(x.rank() - 1)))
      .Add(static_cast<int64_t>(c.attrs.GetInt("diagonal")))
      .Add(static_cast<int32_t>(lower));
  return Enqueue(device, launch);
}

// One pass along `dim` of `in` (shape `from`) into `out` (`from` with dim resized to
// `lists.size()`): output position j sums the input positions lists[j], or is `fill`.
absl::Status PadPass(DeviceRuntime& device, const Tensor& in, const Shape& from, int64_t dim,
                     const std::vector<std::vector<int64_t>>& lists, double fill, Tensor& out) {
  if (out.numel() == 0) return absl::OkStatus();
  const std::string name = absl::StrCat("td_pad_pass_", DTypeName(in.dtype()));
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderPadPass(dialect, name, in.dtype());
                            }};
  // CSR: one bound per position, then the entries the bounds point at.
  std::vector<int64_t> table(lists.size() + 1);
  for (size_t j = 0; j < lists.size(); ++j) {
    table[j] = static_cast<int64_t>(table.size());
    table.insert(table.end(), lists[j].begin(), lists[j].end());
    table[lists.size()] = static_cast<int64_t>(table.size());
  }
  int64_t inner = 1;
  for (size_t d = dim + 1; d < from.size(); ++d) inner *= from[d];
  ASSIGN_OR_RETURN(Operand table_arg, Operand::Constants(device, table));
  ASSIGN_OR_RETURN(Operand in_arg, Operand::Of(in, device));
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  Launch launch(kernel, out.numel());
  Args& args = launch.args;
  args.AddMem(out_arg)
      .AddMem(in_arg)
      .AddMem(table_arg)
      .Add(static_cast<int64_t>(out.numel()))
      .Add(static_cast<int64_t>(from[dim]))
      .Add(static_cast<int64_t>(lists.size()))
      .Add(static_cast<int64_t>(inner));
  // The fill is of the storage type (bool's is a byte), the others' number arguments too.
  if (in.dtype() == DType::kBool) {
    args.Add(static_cast<uint8_t>(fill != 0));
  } else {
    args.AddScalar(in.dtype(), fill);
  }
  return Enqueue(device, launch);
}

// pad reads, per output position of a dim, the input position of PadSourceMap (one or none);
// pad_backward adds to each input position every output position that read it. Dims are
// independent, so each padded dim is one pass; the passes between them write temporaries.
absl::Status RunPad(KernelCall& c, DeviceRuntime& device, bool backward) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  const Shape& unpadded = backward ? out.shape() : x.shape();
  ASSIGN_OR_RETURN(ops::PadSpec s, ops::ResolvePad(c.op.name, unpadded, c.attrs));
  std::vector<int64_t> dims;
  for (size_t d = 0; d < unpadded.size(); ++d) {
    if (s.before[d] != 0 || s.after[d] != 0) dims.push_back(static_cast<int64_t>(d));
  }
  if (dims.empty()) return Copy(device, "clone", x, ContiguousStrides(x.shape()), out);
  const double fill = backward ? 0.0 : c.attrs.GetFloat("value");
  Tensor current = x;
  Shape shape = x.shape();
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = dims[k];
    const std::vector<int64_t> map =
        ops::PadSourceMap(s.mode, unpadded[d], s.before[d], s.after[d], s.out[d]);
    std::vector<std::vector<int64_t>> lists(backward ? unpadded[d] : s.out[d]);
    for (size_t o = 0; o < map.size(); ++o) {
      if (map[o] < 0) continue;
      if (backward) {
        lists[map[o]].push_back(static_cast<int64_t>(o));
      } else {
        lists[o].push_back(map[o]);
      }
    }
    Shape next = shape;
    next[d] = static_cast<int64_t>(lists.size());
    Tensor target = out;
    if (k + 1 < dims.size()) {
      ASSIGN_OR_RETURN(target, Tensor::EmptyOn(device.shared_from_this(), x.dtype(), next,
                                               out.device(), c.account));
    }
    RETURN_IF_ERROR(PadPass(device, current, shape, d, lists, fill, target));
    current = target;
    shape = next;
  }
  return absl::OkStatus();
}

}  // namespace

// One kernel per storage type: the copies move bits.
absl::Status CopyWindow(DeviceRuntime& device, const Tensor& in, Tensor& out,
                        const ops::WindowCopy& w) {
  const int64_t n = NumElements(w.shape);
  if (n == 0) return absl::OkStatus();
  const std::string name = absl::StrCat("td_window_", gpu::StorageTag(in.dtype()));
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderWindowCopy(dialect, name, in.dtype());
                            }};
  const gpu::Geometry g = gpu::StridedGeometry(w.shape, {w.src_strides, w.dst_strides});
  ASSIGN_OR_RETURN(Operand geometry_arg, Operand::Constants(device, g.Flat()));
  ASSIGN_OR_RETURN(Operand in_arg, Operand::Of(in, device));
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  Launch launch(kernel, n);
  Args& args = launch.args;
  args.AddMem(out_arg)
      .AddMem(in_arg)
      .AddMem(geometry_arg)
      .Add(static_cast<int64_t>(n))
      .Add(static_cast<int32_t>(g.shape.size()))
      .Add(static_cast<int64_t>(w.src_offset))
      .Add(static_cast<int64_t>(w.dst_offset));
  return Enqueue(device, launch);
}

// Every op here but pad and pad_backward moves storage bits, so bf16 and f16 run without a trip
// through f32.
void RegisterLayoutKernels(GpuKernelTable& t) {
  for (const OpDef* op : OpRegistry::Builtin().All()) {
    if (ops::IsLayoutOp(op->name)) t.Add(op->name, MovingBits(KernelOf(RunPlan)));
  }
  t.Add("tril", MovingBits(KernelOf(RunTriangle, true)));
  t.Add("triu", MovingBits(KernelOf(RunTriangle, false)));
  t.Add("pad", KernelOf(RunPad, false));
  t.Add("pad_backward", KernelOf(RunPad, true));
}

}  // namespace tensord::gpu
