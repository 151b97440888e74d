// Kernels whose output size depends on the data: masked_select and nonzero count first, then
// allocate through the call's memory account (so the session is charged), then fill.
// masked_select_backward is the inverse placement for masked_select's gradient.
#include <algorithm>
#include <cstring>

#include "server/backends/cpu/loops.h"
#include "server/backends/cpu/shape_kernels.h"

namespace tensord::cpu {
namespace {

// Calls f(out_index, input_offset, mask_offset) for every element of the broadcast of input
// and mask, in row-major order.
template <typename F>
void ForEachBroadcast(const Shape& out, const Tensor& x, const Tensor& mask, F f) {
  std::vector<std::vector<int64_t>> strides = {BroadcastStrides(x.shape(), out),
                                               BroadcastStrides(mask.shape(), out)};
  const int64_t sx = strides[0].empty() ? 0 : strides[0].back();
  const int64_t sm = strides[1].empty() ? 0 : strides[1].back();
  BroadcastWalk(out, strides, [&](const std::vector<int64_t>& off, int64_t o, int64_t len) {
    for (int64_t i = 0; i < len; ++i) f(o + i, off[0] + i * sx, off[1] + i * sm);
  });
}

absl::Status MaskedSelectKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& mask = c.inputs[1];
  ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(x.shape(), mask.shape()));
  const bool* m = mask.data<bool>();
  int64_t count = 0;
  ForEachBroadcast(shape, x, mask, [&](int64_t, int64_t, int64_t k) { count += m[k]; });
  ASSIGN_OR_RETURN(c.outputs[0], Tensor::Empty(x.dtype(), {count}, x.device(), c.account));
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    const T* p = x.data<T>();
    T* q = c.outputs[0].data<T>();
    int64_t n = 0;
    ForEachBroadcast(shape, x, mask, [&](int64_t, int64_t i, int64_t k) {
      if (m[k]) q[n++] = p[i];
    });
  });
  return absl::OkStatus();
}

// Zeros of the broadcast shape with grad[n] at the n-th true position.
absl::Status MaskedSelectBackwardKernel(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  const Tensor& mask = c.inputs[1];
  Tensor& out = c.outputs[0];
  const bool* m = mask.data<bool>();
  int64_t count = 0;
  ForEachBroadcast(out.shape(), out, mask, [&](int64_t, int64_t, int64_t k) { count += m[k]; });
  if (count != g.numel()) {
    return Error(Reason::kShapeMismatch,
                 absl::StrCat("masked_select_backward: grad has ", g.numel(),
                              " elements but the mask selects ", count),
                 {{"op", "masked_select_backward"}, {"shape", ShapeToString(g.shape())}});
  }
  if (out.nbytes()) std::memset(out.raw(), 0, out.nbytes());
  TENSORD_DISPATCH_FLOAT(g.dtype(), [&] {
    const T* p = g.data<T>();
    T* q = out.data<T>();
    int64_t n = 0;
    ForEachBroadcast(out.shape(), out, mask, [&](int64_t o, int64_t, int64_t k) {
      if (m[k]) q[o] = p[n++];
    });
  });
  return absl::OkStatus();
}

absl::Status NonzeroKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const int64_t n = x.numel(), rank = x.rank();
  int64_t count = 0;
  // NaN != 0 holds: NaN counts as nonzero, as in torch.
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < n; ++i) count += p[i] != T(0);
  });
  // as_tuple: one [count] column per dim (one for a 0-d input, whose index is 0); else one
  // [count, rank] tensor.
  const bool columns = c.attrs.GetBool("as_tuple");
  std::vector<int64_t*> column(columns ? c.outputs.size() : 0);
  for (size_t k = 0; k < column.size(); ++k) {
    ASSIGN_OR_RETURN(c.outputs[k], Tensor::Empty(DType::kI64, {count}, x.device(), c.account));
    column[k] = c.outputs[k].data<int64_t>();
  }
  int64_t* q = nullptr;
  if (!columns) {
    ASSIGN_OR_RETURN(c.outputs[0],
                     Tensor::Empty(DType::kI64, {count, rank}, x.device(), c.account));
    q = c.outputs[0].data<int64_t>();
  }
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    const T* p = x.data<T>();
    std::vector<int64_t> index(std::max<int64_t>(rank, 1), 0);
    for (int64_t i = 0; i < n; ++i) {
      if (p[i] != T(0)) {
        if (columns) {
          for (size_t k = 0; k < column.size(); ++k) *column[k]++ = index[k];
        } else {
          std::copy(index.begin(), index.begin() + rank, q);
          q += rank;
        }
      }
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++index[d] < x.dim(d)) break;
        index[d] = 0;
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterIndexingSelectKernels(KernelTable& t) {
  t.Add("masked_select", "loop_masked_select", kAll, MaskedSelectKernel);
  t.Add("masked_select_backward", "loop_masked_select_backward", kFloat,
        MaskedSelectBackwardKernel);
  t.Add("nonzero", "loop_nonzero", kAll, NonzeroKernel);
}

}  // namespace tensord::cpu
