// Kernels for sort, argsort and topk: each line along the dim is ordered as an index array.
// The comparison breaks ties by index, which makes it a strict total order: std::sort and
// std::partial_sort then give exactly torch's stable-sort result (NaN above every number,
// equal values in index order, also when descending).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "server/backends/cpu/loops.h"
#include "server/backends/cpu/shape_kernels.h"
#include "server/ops/shape_ops.h"

namespace tensord::cpu {
namespace {

// a before b in ascending order with NaN largest (NaNs compare equal among themselves).
template <typename T>
bool Less(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

// Sorts each line of `x` along `dim` and writes the first `k` of every line: indices into
// `indices` (i64) and, when given, values into `values`.
absl::Status SortLines(KernelCall& c, bool descending, int64_t k, Tensor* values, Tensor& indices) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim(c.op.name, "dim", c.attrs.GetInt("dim"), x.rank()));
  const DimSplit s = x.rank() ? SplitAt(x.shape(), dim) : DimSplit{};
  if (x.numel() == 0 || k == 0) {
    // torch.topk of a 0-d tensor returns it whatever k is (k may be 0 or 1 there).
    if (x.rank() != 0) return absl::OkStatus();
    k = 1;
  }
  int64_t* idx_out = indices.data<int64_t>();
  TENSORD_DISPATCH_NUMERIC(x.dtype(), [&] {
    const T* p = x.data<T>();
    T* val_out = values ? values->data<T>() : nullptr;
    std::vector<int64_t> order(s.size);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t in = 0; in < s.inner; ++in) {
        const T* line = p + o * s.size * s.inner + in;
        auto before = [&](int64_t a, int64_t b) {
          const T va = line[a * s.inner], vb = line[b * s.inner];
          if (descending ? Less(vb, va) : Less(va, vb)) return true;
          if (descending ? Less(va, vb) : Less(vb, va)) return false;
          return a < b;
        };
        std::iota(order.begin(), order.end(), int64_t{0});
        if (k < s.size) {
          std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        } else {
          std::sort(order.begin(), order.end(), before);
        }
        const int64_t base = o * k * s.inner + in;
        for (int64_t j = 0; j < k; ++j) {
          idx_out[base + j * s.inner] = order[j];
          if (val_out) val_out[base + j * s.inner] = line[order[j] * s.inner];
        }
      }
    }
  });
  return absl::OkStatus();
}

absl::Status SortKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim("sort", "dim", c.attrs.GetInt("dim"), x.rank()));
  return SortLines(c, c.attrs.GetBool("descending"), x.rank() ? x.dim(dim) : 1, &c.outputs[0],
                   c.outputs[1]);
}

absl::Status ArgsortKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim("argsort", "dim", c.attrs.GetInt("dim"), x.rank()));
  return SortLines(c, c.attrs.GetBool("descending"), x.rank() ? x.dim(dim) : 1, nullptr,
                   c.outputs[0]);
}

absl::Status TopkKernel(KernelCall& c) {
  return SortLines(c, c.attrs.GetBool("largest"), c.attrs.GetInt("k"), &c.outputs[0], c.outputs[1]);
}

}  // namespace

void RegisterSortingKernels(KernelTable& t) {
  t.Add("sort", "std_sort", kFloatInt, SortKernel);
  t.Add("argsort", "std_sort", kFloatInt, ArgsortKernel);
  t.Add("topk", "std_partial_sort", kFloatInt, TopkKernel);
}

}  // namespace tensord::cpu
