// Kernels for joins and ranges along one dim: cat, stack, split, chunk, narrow, slice and
// slice_backward. Each is a window copy: the part of the big tensor a small one maps to is an
// offset plus the big tensor's strides (times the step, for slices).
#include <cstring>

#include "server/backends/cpu/shape_kernels.h"
#include "server/backends/cpu/strided_copy.h"
#include "server/ops/shape_ops.h"

namespace tensord::cpu {
namespace {

bool LegacyEmpty(const Tensor& t) { return t.rank() == 1 && t.dim(0) == 0; }

absl::Status CatKernel(KernelCall& c) {
  Tensor& out = c.outputs[0];
  const Tensor* ref = nullptr;
  for (const Tensor& t : c.inputs) {
    if (!LegacyEmpty(t)) {
      ref = &t;
      break;
    }
  }
  if (ref == nullptr) return absl::OkStatus();  // every input was a skipped [0] tensor
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim("cat", "dim", c.attrs.GetInt("dim"), ref->rank()));
  const std::vector<int64_t> strides = ContiguousStrides(out.shape());
  int64_t at = 0;
  for (const Tensor& t : c.inputs) {
    if (LegacyEmpty(t)) continue;
    CopyIntoWindow(t, out, at * strides[dim], strides);
    at += t.dim(dim);
  }
  return absl::OkStatus();
}

absl::Status StackKernel(KernelCall& c) {
  Tensor& out = c.outputs[0];
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim("stack", "dim", c.attrs.GetInt("dim"), out.rank()));
  const std::vector<int64_t> strides = ContiguousStrides(out.shape());
  // Input i is the slab [i] of dim `dim`: its shape with a 1 there has the output's strides.
  std::vector<int64_t> dst_strides = strides;
  dst_strides.erase(dst_strides.begin() + dim);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    CopyIntoWindow(c.inputs[i], out, static_cast<int64_t>(i) * strides[dim], dst_strides);
  }
  return absl::OkStatus();
}

// split and chunk: the output shapes (from infer) already say where each piece ends.
absl::Status SplitKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim(c.op.name, "dim", c.attrs.GetInt("dim"), x.rank()));
  const std::vector<int64_t> strides = ContiguousStrides(x.shape());
  int64_t at = 0;
  for (Tensor& piece : c.outputs) {
    CopyFromWindow(x, at * strides[dim], strides, piece);
    at += piece.dim(dim);
  }
  return absl::OkStatus();
}

absl::Status SliceWith(KernelCall& c, const ops::SliceSpec& s) {
  const Tensor& x = c.inputs[0];
  std::vector<int64_t> strides = ContiguousStrides(x.shape());
  const int64_t offset = s.start * strides[s.dim];
  strides[s.dim] *= s.step;
  CopyFromWindow(x, offset, strides, c.outputs[0]);
  return absl::OkStatus();
}

absl::Status SliceKernel(KernelCall& c) {
  ASSIGN_OR_RETURN(ops::SliceSpec s, ops::ResolveSlice(c.inputs[0].shape(), c.attrs));
  return SliceWith(c, s);
}

absl::Status NarrowKernel(KernelCall& c) {
  ASSIGN_OR_RETURN(ops::SliceSpec s, ops::ResolveNarrow(c.inputs[0].shape(), c.attrs));
  return SliceWith(c, s);
}

// Zeros with the gradient written back at start, start + step, ... along dim.
absl::Status SliceBackwardKernel(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  Tensor& out = c.outputs[0];
  ASSIGN_OR_RETURN(int64_t dim,
                   ops::WrapDim("slice_backward", "dim", c.attrs.GetInt("dim"), g.rank()));
  if (out.nbytes()) std::memset(out.raw(), 0, out.nbytes());
  std::vector<int64_t> strides = ContiguousStrides(out.shape());
  const int64_t offset = c.attrs.GetInt("start") * strides[dim];
  strides[dim] *= c.attrs.GetInt("step");
  CopyIntoWindow(g, out, offset, strides);
  return absl::OkStatus();
}

}  // namespace

void RegisterShapeJoinKernels(KernelTable& t) {
  t.Add("cat", "strided_cat", kAll, CatKernel);
  t.Add("stack", "strided_stack", kAll, StackKernel);
  t.Add("split", "strided_split", kAll, SplitKernel);
  t.Add("chunk", "strided_split", kAll, SplitKernel);
  t.Add("narrow", "strided_slice", kAll, NarrowKernel);
  t.Add("slice", "strided_slice", kAll, SliceKernel);
  t.Add("slice_backward", "strided_slice_backward", kFloatInt, SliceBackwardKernel);
}

}  // namespace tensord::cpu
