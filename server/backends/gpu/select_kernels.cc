// nonzero, masked_select and masked_select_backward on a GPU device: the chunked scan of
// gpu/select_source.h. The counts are read back once per call (the output size depends on
// them), so these ops synchronise the device's queue, as they do on any GPU.
#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/select_source.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/core/status.h"

namespace tensord::gpu {
namespace {

// Enough elements per chunk that the counts read back stay under 16,384 numbers, and enough
// chunks for a device's parallelism on the sizes that matter.
int64_t ChunkSize(int64_t n) { return std::max<int64_t>(256, (n + 16383) / 16384); }

// Where each chunk of a walk writes its first selection, and how many there are in all.
struct Scan {
  int64_t total = 0;
  int64_t chunk = 1, chunks = 0;
  std::optional<Operand> offsets;  // none when there are no elements
};

// Counts the nonzero elements of `m` read with `m_strides` over `shape`, per chunk, and turns
// the counts into each chunk's first output position.
absl::StatusOr<Scan> CountChunks(DeviceRuntime& device, const Tensor& m, const Shape& shape,
                                 std::vector<int64_t> m_strides) {
  Scan scan;
  const int64_t n = NumElements(shape);
  if (n == 0) return scan;
  scan.chunk = ChunkSize(n);
  scan.chunks = (n + scan.chunk - 1) / scan.chunk;
  const std::string name = KernelName("chunk_count", {m.dtype()});
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderChunkCount(dialect, name, m.dtype());
                            }};
  const gpu::Geometry g = gpu::StridedGeometry(shape, {std::move(m_strides)});
  ASSIGN_OR_RETURN(Operand geometry_arg, Operand::Constants(device, g.Flat()));
  ASSIGN_OR_RETURN(Operand counts_arg, Operand::Block(device, scan.chunks * sizeof(int64_t)));
  ASSIGN_OR_RETURN(Operand m_arg, Operand::Of(m, device));
  {
    Launch launch(kernel, scan.chunks);
    Args& args = launch.args;
    args.AddMem(counts_arg)
        .AddMem(m_arg)
        .AddMem(geometry_arg)
        .Add(static_cast<int64_t>(n))
        .Add(static_cast<int32_t>(g.shape.size()))
        .Add(static_cast<int64_t>(scan.chunk));
    RETURN_IF_ERROR(Enqueue(device, launch));
  }
  std::vector<int64_t> counts(scan.chunks);
  RETURN_IF_ERROR(
      device.Read(counts_arg.block(), 0, counts.data(), counts.size() * sizeof(int64_t)));
  for (int64_t& c : counts) {
    const int64_t here = c;
    c = scan.total;
    scan.total += here;
  }
  ASSIGN_OR_RETURN(Operand offsets, Operand::Constants(device, counts));
  scan.offsets.emplace(std::move(offsets));
  return scan;
}

// Runs the write pass of `what` for `scan` over `walk` (the geometry's shape), after the
// leading buffer arguments `buffers` and before the trailing `extra` (nonzero's column).
absl::Status WriteChunks(DeviceRuntime& device, gpu::Selection what, DType dtype, const Scan& scan,
                         const gpu::Geometry& walk, const std::vector<const Operand*>& buffers,
                         int column) {
  const std::string name =
      absl::StrCat("td_select_", static_cast<int>(what), "_", gpu::StorageTag(dtype));
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderSelection(dialect, name, dtype, what);
                            }};
  ASSIGN_OR_RETURN(Operand geometry_arg, Operand::Constants(device, walk.Flat()));
  Launch launch(kernel, scan.chunks);
  Args& args = launch.args;
  for (const Operand* b : buffers) args.AddMem(*b);
  args.AddMem(*scan.offsets)
      .AddMem(geometry_arg)
      .Add(static_cast<int64_t>(NumElements(walk.shape)))
      .Add(static_cast<int32_t>(walk.shape.size()))
      .Add(static_cast<int64_t>(scan.chunk));
  if (what == gpu::Selection::kNonzeroIndices) args.Add(static_cast<int32_t>(column));
  return Enqueue(device, launch);
}

absl::Status RunNonzero(KernelCall& c, DeviceRuntime& device) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(Scan scan, CountChunks(device, x, x.shape(), ContiguousStrides(x.shape())));
  const int64_t rank = x.rank();
  // as_tuple: one [count] column per dim (one for a 0-d input, whose index is 0); else one
  // [count, rank] tensor.
  const bool columns = c.attrs.GetBool("as_tuple");
  for (size_t k = 0; k < (columns ? c.outputs.size() : 1); ++k) {
    const Shape shape = columns ? Shape{scan.total} : Shape{scan.total, rank};
    ASSIGN_OR_RETURN(c.outputs[k], Tensor::EmptyOn(device.shared_from_this(), DType::kI64, shape,
                                                   x.device(), c.account));
    if (c.outputs[k].numel() == 0) continue;
    ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(c.outputs[k], device));
    ASSIGN_OR_RETURN(Operand x_arg, Operand::Of(x, device));
    // The multi-index needs x's own shape, not a merged one.
    gpu::Geometry walk;
    walk.shape = x.shape();
    RETURN_IF_ERROR(WriteChunks(device, gpu::Selection::kNonzeroIndices, x.dtype(), scan, walk,
                                {&out_arg, &x_arg}, columns ? static_cast<int>(k) : -1));
  }
  return absl::OkStatus();
}

absl::Status RunMaskedSelect(KernelCall& c, DeviceRuntime& device) {
  const Tensor& x = c.inputs[0];
  const Tensor& mask = c.inputs[1];
  ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(x.shape(), mask.shape()));
  ASSIGN_OR_RETURN(Scan scan,
                   CountChunks(device, mask, shape, BroadcastStrides(mask.shape(), shape)));
  ASSIGN_OR_RETURN(c.outputs[0], Tensor::EmptyOn(device.shared_from_this(), x.dtype(), {scan.total},
                                                 x.device(), c.account));
  if (scan.total == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(c.outputs[0], device));
  ASSIGN_OR_RETURN(Operand x_arg, Operand::Of(x, device));
  ASSIGN_OR_RETURN(Operand mask_arg, Operand::Of(mask, device));
  return WriteChunks(device, gpu::Selection::kMaskedValues, x.dtype(), scan,
                     gpu::BroadcastGeometry(shape, {x.shape(), mask.shape()}),
                     {&out_arg, &x_arg, &mask_arg}, -1);
}

// Zeros of the broadcast shape with grad[j] at the j-th true position.
absl::Status RunMaskedPlacement(KernelCall& c, DeviceRuntime& device) {
  const Tensor& g = c.inputs[0];
  const Tensor& mask = c.inputs[1];
  Tensor& out = c.outputs[0];
  ASSIGN_OR_RETURN(Scan scan, CountChunks(device, mask, out.shape(),
                                          BroadcastStrides(mask.shape(), out.shape())));
  if (scan.total != g.numel()) {
    return Error(Reason::kShapeMismatch,
                 absl::StrCat("masked_select_backward: grad has ", g.numel(),
                              " elements but the mask selects ", scan.total),
                 {{"op", "masked_select_backward"}, {"shape", ShapeToString(g.shape())}});
  }
  if (out.numel() == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  ASSIGN_OR_RETURN(Operand g_arg, Operand::Of(g, device));
  ASSIGN_OR_RETURN(Operand mask_arg, Operand::Of(mask, device));
  return WriteChunks(
      device, gpu::Selection::kMaskedPlacement, g.dtype(), scan,
      gpu::StridedGeometry(out.shape(), {BroadcastStrides(mask.shape(), out.shape())}),
      {&out_arg, &g_arg, &mask_arg}, -1);
}

}  // namespace

// Selections move the bits of every dtype (nonzero compares them through the dialect's loads).
void RegisterSelectKernels(GpuKernelTable& t) {
  t.Add("nonzero", MovingBits(KernelOf(RunNonzero)));
  t.Add("masked_select", MovingBits(KernelOf(RunMaskedSelect)));
  t.Add("masked_select_backward", MovingBits(KernelOf(RunMaskedPlacement)));
}

}  // namespace tensord::gpu
