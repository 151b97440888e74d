// The ops that index by tensors on a GPU device: index_select, gather and embedding read
// through the index on the device; scatter, scatter_add, index_add, embedding's gradient and
// one_hot write through lists built on the host. Every index is read to the host and checked
// first (ops/index_checks.h), so a bad index fails before anything is written: one
// synchronisation per call.
// The reads, which move storage bits (bf16 and f16 without a trip through f32).
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/indexing_source.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/ops/index_checks.h"
#include "server/ops/shape_ops.h"

namespace tensord::gpu {
namespace {

absl::StatusOr<std::vector<int64_t>> ReadIndices(const Tensor& index, DeviceRuntime& device) {
  ASSIGN_OR_RETURN(Tensor host, ReadToHost(index, device));
  return ops::IndexValues(host);
}

// (outer, size, inner) of `shape` around `dim`; a 0-d tensor is one element.
struct Around {
  int64_t outer = 1, size = 1, inner = 1;
};
Around Split(const Shape& shape, int64_t dim) {
  Around a;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    (d < dim ? a.outer : d == dim ? a.size : a.inner) *= shape[d];
  }
  return a;
}

// out[i] = x[xo + idx[io] * dim_stride] over `walk`, xo and io advancing by their strides.
absl::Status Gather(DeviceRuntime& device, const Tensor& x, const Tensor& index, const Shape& walk,
                    std::vector<int64_t> x_strides, std::vector<int64_t> index_strides,
                    int64_t dim_stride, Tensor& out) {
  if (out.numel() == 0) return absl::OkStatus();
  const std::string name =
      absl::StrCat("td_gather_", gpu::StorageTag(x.dtype()), "_", DTypeName(index.dtype()));
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderGather(dialect, name, x.dtype(), index.dtype());
                            }};
  const gpu::Geometry g =
      gpu::StridedGeometry(walk, {std::move(x_strides), std::move(index_strides)});
  ASSIGN_OR_RETURN(Operand geometry_arg, Operand::Constants(device, g.Flat()));
  ASSIGN_OR_RETURN(Operand x_arg, Operand::Of(x, device));
  ASSIGN_OR_RETURN(Operand index_arg, Operand::Of(index, device));
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  Launch launch(kernel, out.numel());
  Args& args = launch.args;
  args.AddMem(out_arg)
      .AddMem(x_arg)
      .AddMem(index_arg)
      .AddMem(geometry_arg)
      .Add(static_cast<int64_t>(out.numel()))
      .Add(static_cast<int32_t>(g.shape.size()))
      .Add(static_cast<int64_t>(dim_stride));
  return Enqueue(device, launch);
}

// What an indexing op reads or writes (bound at registration).
enum class Indexed { kEmbedding, kIndexSelect, kGather, kScatter, kScatterAdd };

absl::Status RunRead(KernelCall& c, DeviceRuntime& device, Indexed what) {
  const std::string& op = c.op.name;
  Tensor& out = c.outputs[0];
  if (what == Indexed::kEmbedding) {
    const Tensor& index = c.inputs[0];
    const Tensor& w = c.inputs[1];
    ASSIGN_OR_RETURN(std::vector<int64_t> values, ReadIndices(index, device));
    RETURN_IF_ERROR(ops::CheckEmbeddingIndices(op, values, w.dim(0)));
    return Gather(device, w, index, {index.numel(), w.dim(1)}, {0, 1}, {1, 0}, w.dim(1), out);
  }
  const Tensor& x = c.inputs[0];
  const Tensor& index = c.inputs[1];
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim(op, "dim", c.attrs.GetInt("dim"), x.rank()));
  ASSIGN_OR_RETURN(std::vector<int64_t> values, ReadIndices(index, device));
  if (what == Indexed::kIndexSelect) {
    const Around a = Split(x.shape(), dim);
    RETURN_IF_ERROR(ops::CheckIndexRange(op, values, dim, a.size));
    return Gather(device, x, index, {a.outer, index.numel(), a.inner}, {a.size * a.inner, 0, 1},
                  {0, 1, 0}, a.inner, out);
  }
  // gather walks the index's positions with x's strides, dim's stride added per element.
  const Shape xs = x.rank() ? x.shape() : Shape{1};
  const Shape is = index.rank() ? index.shape() : Shape{1};
  RETURN_IF_ERROR(ops::CheckIndexRange(op, values, dim, xs[dim]));
  std::vector<int64_t> walk = ContiguousStrides(xs);
  const int64_t dim_stride = walk[dim];
  walk[dim] = 0;
  return Gather(device, x, index, is, std::move(walk), ContiguousStrides(is), dim_stride, out);
}

// Per output element, the src offsets written to it, in the order the CPU writes them: a
// stable counting sort of (target, source) pairs into CSR.
std::vector<int64_t> ListsByTarget(int64_t targets, const std::vector<int64_t>& target,
                                   const std::vector<int64_t>& source) {
  std::vector<int64_t> table(targets + 1 + source.size(), 0);
  for (int64_t t : target) ++table[t + 1];
  table[0] = targets + 1;
  for (int64_t i = 0; i < targets; ++i) table[i + 1] += table[i];
  std::vector<int64_t> next(table.begin(), table.begin() + targets);
  for (size_t k = 0; k < target.size(); ++k) table[next[target[k]]++] = source[k];
  return table;
}

absl::Status ListedWrite(DeviceRuntime& device, gpu::ListedWrite how, const Tensor* x,
                         const Tensor& src, const std::vector<int64_t>& target,
                         const std::vector<int64_t>& source, double alpha, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return absl::OkStatus();
  const std::string name =
      absl::StrCat("td_listed_", static_cast<int>(how), "_", DTypeName(out.dtype()));
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderListedWrite(dialect, name, out.dtype(), how);
                            }};
  ASSIGN_OR_RETURN(Operand table_arg, Operand::Constants(device, ListsByTarget(n, target, source)));
  ASSIGN_OR_RETURN(Operand src_arg, Operand::Of(src, device));
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  std::optional<Operand> x_arg;
  if (x != nullptr) {
    ASSIGN_OR_RETURN(Operand o, Operand::Of(*x, device));
    x_arg.emplace(std::move(o));
  }
  Launch launch(kernel, n);
  Args& args = launch.args;
  args.AddMem(out_arg);
  if (x_arg) args.AddMem(*x_arg);
  args.AddMem(src_arg).AddMem(table_arg).Add(static_cast<int64_t>(n)).AddScalar(out.dtype(), alpha);
  return Enqueue(device, launch);
}

// scatter, scatter_add (and gather's gradient): index position p writes src[p] to x at p
// with dim replaced by idx[p]; p runs row-major, as on the CPU.
absl::Status RunScatter(KernelCall& c, DeviceRuntime& device, Indexed what) {
  const std::string& op = c.op.name;
  const Tensor& x = c.inputs[0];
  const Tensor& index = c.inputs[1];
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim(op, "dim", c.attrs.GetInt("dim"), x.rank()));
  const Shape xs = x.rank() ? x.shape() : Shape{1};
  const Shape is = index.rank() ? index.shape() : Shape{1};
  ASSIGN_OR_RETURN(std::vector<int64_t> values, ReadIndices(index, device));
  RETURN_IF_ERROR(ops::CheckIndexRange(op, values, dim, xs[dim]));
  Tensor src = c.inputs[2];
  const bool value = src.wrapped_number();
  if (value) {
    ASSIGN_OR_RETURN(src, ops::ScatterValueTensor(op, c.inputs[2], x.dtype()));
  }
  const std::vector<int64_t> x_strides = ContiguousStrides(xs);
  const std::vector<int64_t> src_strides = ContiguousStrides(src.rank() ? src.shape() : Shape{1});
  std::vector<int64_t> target(values.size()), source(values.size(), 0);
  std::vector<int64_t> p(is.size(), 0);
  for (size_t k = 0; k < values.size(); ++k) {
    int64_t t = 0, s = 0;
    for (size_t d = 0; d < is.size(); ++d) {
      t += (static_cast<int64_t>(d) == dim ? values[k] : p[d]) * x_strides[d];
      s += p[d] * src_strides[d];
    }
    target[k] = t;
    if (!value) source[k] = s;
    for (int64_t d = static_cast<int64_t>(is.size()) - 1; d >= 0; --d) {
      if (++p[d] < is[d]) break;
      p[d] = 0;
    }
  }
  const gpu::ListedWrite how =
      what == Indexed::kScatter ? gpu::ListedWrite::kAssign : gpu::ListedWrite::kAdd;
  return ListedWrite(device, how, &x, src, target, source, 1.0, c.outputs[0]);
}

// index_add (and index_select's gradient): src[o, j, k] is added to x[o, idx[j], k].
absl::Status RunIndexAdd(KernelCall& c, DeviceRuntime& device, bool with_alpha) {
  const std::string& op = c.op.name;
  const Tensor& x = c.inputs[0];
  const Tensor& index = c.inputs[1];
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim(op, "dim", c.attrs.GetInt("dim"), x.rank()));
  const Around a = Split(x.shape(), dim);
  ASSIGN_OR_RETURN(std::vector<int64_t> values, ReadIndices(index, device));
  RETURN_IF_ERROR(ops::CheckIndexRange(op, values, dim, a.size));
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<int64_t> target, source;
  target.reserve(a.outer * n * a.inner);
  source.reserve(a.outer * n * a.inner);
  for (int64_t o = 0; o < a.outer; ++o) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t k = 0; k < a.inner; ++k) {
        target.push_back((o * a.size + values[j]) * a.inner + k);
        source.push_back((o * n + j) * a.inner + k);
      }
    }
  }
  const double alpha = with_alpha ? c.attrs.GetFloat("alpha") : 1.0;
  return ListedWrite(device, gpu::ListedWrite::kAdd, &x, c.inputs[2], target, source, alpha,
                     c.outputs[0]);
}

// Row k of the weight's gradient sums the gradient rows of the positions holding k; the
// padding row gets none.
absl::Status RunEmbeddingBackward(KernelCall& c, DeviceRuntime& device) {
  const Tensor& g = c.inputs[0];
  const Tensor& index = c.inputs[1];
  Tensor& out = c.outputs[0];
  const int64_t v = out.dim(0), d = out.dim(1);
  ASSIGN_OR_RETURN(std::vector<int64_t> values, ReadIndices(index, device));
  RETURN_IF_ERROR(ops::CheckEmbeddingIndices(c.op.name, values, v));
  int64_t pad = -1;
  if (c.attrs.Has("padding_idx")) {
    pad = c.attrs.GetInt("padding_idx");
    if (pad < 0) pad += v;
  }
  std::vector<int64_t> target, source;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] == pad) continue;
    for (int64_t j = 0; j < d; ++j) {
      target.push_back(values[i] * d + j);
      source.push_back(static_cast<int64_t>(i) * d + j);
    }
  }
  return ListedWrite(device, gpu::ListedWrite::kAddToZero, nullptr, g, target, source, 1.0, out);
}

absl::Status RunOneHot(KernelCall& c, DeviceRuntime& device) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> values, ReadIndices(x, device));
  ASSIGN_OR_RETURN(int64_t classes,
                   ops::OneHotClasses(values, c.attrs.GetInt("num_classes"), x.rank()));
  Tensor& out = c.outputs[0];
  if (!out.defined()) {  // num_classes -1: the size was the values'
    Shape shape = x.shape();
    shape.push_back(classes);
    ASSIGN_OR_RETURN(
        out, Tensor::EmptyOn(device.shared_from_this(), DType::kI64, shape, x.device(), c.account));
  }
  RETURN_IF_ERROR(Fill(device, 0.0, out));
  if (x.numel() == 0) return absl::OkStatus();
  const std::string name = absl::StrCat("td_one_hot_", DTypeName(x.dtype()));
  const KernelSource kernel{name, name, [&](const Dialect& dialect) {
                              return gpu::RenderOneHot(dialect, name, x.dtype());
                            }};
  ASSIGN_OR_RETURN(Operand x_arg, Operand::Of(x, device));
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  Launch launch(kernel, x.numel());
  Args& args = launch.args;
  args.AddMem(out_arg)
      .AddMem(x_arg)
      .Add(static_cast<int64_t>(x.numel()))
      .Add(static_cast<int64_t>(classes));
  return Enqueue(device, launch);
}

}  // namespace

void RegisterIndexingKernels(GpuKernelTable& t) {
  // The reads move storage bits (bf16 and f16 without a trip through f32).
  t.Add("embedding", MovingBits(KernelOf(RunRead, Indexed::kEmbedding)));
  t.Add("index_select", MovingBits(KernelOf(RunRead, Indexed::kIndexSelect)));
  t.Add("gather", MovingBits(KernelOf(RunRead, Indexed::kGather)));
  t.Add("scatter", KernelOf(RunScatter, Indexed::kScatter));
  t.Add("scatter_add", KernelOf(RunScatter, Indexed::kScatterAdd));
  t.Add("scatter_add_internal", KernelOf(RunScatter, Indexed::kScatterAdd));
  // index_add_internal (index_select's gradient) adds with alpha 1.
  t.Add("index_add", KernelOf(RunIndexAdd, true));
  t.Add("index_add_internal", KernelOf(RunIndexAdd, false));
  t.Add("embedding_backward", KernelOf(RunEmbeddingBackward));
  t.Add("one_hot", KernelOf(RunOneHot));
}

}  // namespace tensord::gpu
