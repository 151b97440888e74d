// Kernels for pad and pad_backward. Per dim, a map from output position to the input position
// it reads (-1: the constant) says everything about the mode; the N-d index is the sum of the
// per-dim positions, so one walk serves every mode in both directions.
#include <algorithm>
#include <cstring>

#include "server/backends/cpu/shape_kernels.h"
#include "server/ops/layout_plan.h"
#include "server/ops/shape_ops.h"

namespace tensord::cpu {
namespace {

// Calls f(out_offset, in_offset or -1) for every output element, one row of the last dim at
// a time; a 0-d tensor is one element.
template <typename F>
void ForEachPadded(const Shape& in, const ops::PadSpec& s, F f) {
  const int64_t rank = static_cast<int64_t>(in.size());
  if (NumElements(s.out) == 0) return;
  if (rank == 0) {
    f(int64_t{0}, int64_t{0});
    return;
  }
  std::vector<std::vector<int64_t>> maps(rank);
  for (int64_t d = 0; d < rank; ++d)
    maps[d] = ops::PadSourceMap(s.mode, in[d], s.before[d], s.after[d], s.out[d]);
  const std::vector<int64_t> strides = ContiguousStrides(in);
  const int64_t cols = s.out[rank - 1];
  const std::vector<int64_t>& last = maps[rank - 1];
  std::vector<int64_t> index(rank - 1, 0);
  for (int64_t row = 0, rows = NumElements(s.out) / cols; row < rows; ++row) {
    int64_t base = 0;
    bool inside = true;
    for (int64_t d = 0; d + 1 < rank; ++d) {
      const int64_t m = maps[d][index[d]];
      inside &= m >= 0;
      base += m * strides[d];
    }
    for (int64_t j = 0; j < cols; ++j) {
      f(row * cols + j, inside && last[j] >= 0 ? base + last[j] : int64_t{-1});
    }
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++index[d] < s.out[d]) break;
      index[d] = 0;
    }
  }
}

absl::Status PadKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(ops::PadSpec s, ops::ResolvePad("pad", x.shape(), c.attrs));
  const double value = c.attrs.GetFloat("value");
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    const T* p = x.data<T>();
    T* q = c.outputs[0].data<T>();
    const T fill = ConvertElement<T>(value);
    ForEachPadded(x.shape(), s, [&](int64_t o, int64_t i) { q[o] = i < 0 ? fill : p[i]; });
  });
  return absl::OkStatus();
}

// Adds each output gradient to the input element it was read from.
absl::Status PadBackwardKernel(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  Tensor& out = c.outputs[0];
  ASSIGN_OR_RETURN(ops::PadSpec s, ops::ResolvePad("pad_backward", out.shape(), c.attrs));
  if (out.nbytes()) std::memset(out.raw(), 0, out.nbytes());
  TENSORD_DISPATCH_FLOAT(g.dtype(), [&] {
    const T* p = g.data<T>();
    T* q = out.data<T>();
    ForEachPadded(out.shape(), s, [&](int64_t o, int64_t i) {
      if (i >= 0) q[i] += p[o];
    });
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterPadKernels(KernelTable& t) {
  t.Add("pad", "loop_pad", kAll, PadKernel);
  t.Add("pad_backward", "loop_pad_backward", kFloat, PadBackwardKernel);
}

}  // namespace tensord::cpu
