// Kernels for indexing by tensors: index_select, gather, their scatter-add gradients, the
// client-facing scatter, scatter_add and index_add, masked_fill and one_hot. Every index is
// validated before anything is read or written, so a bad index is an INDEX_OUT_OF_RANGE error
// and never an out-of-bounds access.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "server/backends/cpu/loops.h"
#include "server/backends/cpu/shape_kernels.h"
#include "server/ops/index_checks.h"
#include "server/ops/shape_ops.h"

namespace tensord::cpu {
namespace {

// Calls f(const I* data) with the index tensor's element type (infer admits i32 and i64 only).
template <typename F>
void WithIndex(const Tensor& index, F f) {
  if (index.dtype() == DType::kI32) {
    f(index.data<int32_t>());
  } else {
    f(index.data<int64_t>());
  }
}

// (outer, size, inner) of `shape` around `dim`; a 0-d tensor counts as one element.
DimSplit Around(const Shape& shape, int64_t dim) {
  return shape.empty() ? DimSplit{} : SplitAt(shape, dim);
}

// out[o, j, k] (op)= src[o, idx[j], k] for index_select, or the reverse for index_add.
absl::Status IndexAlongDim(KernelCall& c, bool add, double alpha_value) {
  const Tensor& x = c.inputs[0];
  const Tensor& index = c.inputs[1];
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim(c.op.name, "dim", c.attrs.GetInt("dim"), x.rank()));
  const DimSplit s = Around(x.shape(), dim);
  const int64_t n = index.numel();
  RETURN_IF_ERROR(ops::CheckIndexRange(c.op.name, ops::IndexValues(index), dim, s.size));
  Tensor& out = c.outputs[0];
  if (add && x.nbytes()) std::memcpy(out.raw(), x.raw(), x.nbytes());
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    WithIndex(index, [&](const auto* idx) {
      T* q = out.data<T>();
      if (!add) {
        const T* p = x.data<T>();
        for (int64_t o = 0; o < s.outer; ++o) {
          for (int64_t j = 0; j < n; ++j) {
            const T* from = p + (o * s.size + idx[j]) * s.inner;
            std::copy(from, from + s.inner, q + (o * n + j) * s.inner);
          }
        }
      } else if constexpr (!std::is_same_v<T, bool>) {
        const T* src = c.inputs[2].data<T>();
        // index_add's alpha (infer checked it is integral for integer dtypes).
        const T alpha = static_cast<T>(alpha_value);
        for (int64_t o = 0; o < s.outer; ++o) {
          for (int64_t j = 0; j < n; ++j) {
            T* to = q + (o * s.size + idx[j]) * s.inner;
            const T* from = src + (o * n + j) * s.inner;
            if (alpha == T(1)) {
              for (int64_t k = 0; k < s.inner; ++k) to[k] += from[k];
            } else {
              for (int64_t k = 0; k < s.inner; ++k) to[k] += alpha * from[k];
            }
          }
        }
      }
    });
  });
  return absl::OkStatus();
}

absl::Status IndexSelectKernel(KernelCall& c) { return IndexAlongDim(c, false, 1.0); }
// index_add scales the source by its alpha; index_add_internal (index_select's gradient) has
// no alpha and adds the source as it is.
absl::Status IndexAddKernel(KernelCall& c) {
  return IndexAlongDim(c, true, c.attrs.GetFloat("alpha"));
}
absl::Status IndexAddInternalKernel(KernelCall& c) { return IndexAlongDim(c, true, 1.0); }

enum class Scatter { kNone, kAdd, kAssign };

// gather: out[p] = x[p with dim replaced by idx[p]]; the scatters write src[p] there instead
// (added or assigned). The walk runs over the index's positions with x's strides, dim's stride
// zeroed and added per element; src is read at the same position with its own strides, since
// torch lets src be larger than the index.
absl::Status GatherLike(KernelCall& c, Scatter scatter) {
  const Tensor& x = c.inputs[0];
  const Tensor& index = c.inputs[1];
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim(c.op.name, "dim", c.attrs.GetInt("dim"), x.rank()));
  const Shape xs = x.rank() ? x.shape() : Shape{1};
  const Shape is = index.rank() ? index.shape() : Shape{1};
  std::vector<int64_t> walk = ContiguousStrides(xs);
  const int64_t dim_stride = walk[dim];
  walk[dim] = 0;
  std::vector<int64_t> src_walk = walk;
  // scatter's number src is read at offset 0 for every indexed place.
  const bool value = scatter != Scatter::kNone && c.inputs[2].wrapped_number();
  if (value) {
    src_walk.assign(walk.size(), 0);
  } else if (scatter != Scatter::kNone) {
    const Tensor& src = c.inputs[2];
    src_walk = ContiguousStrides(src.rank() ? src.shape() : Shape{1});
  }
  RETURN_IF_ERROR(ops::CheckIndexRange(c.op.name, ops::IndexValues(index), dim, xs[dim]));
  absl::Status st;
  Tensor& out = c.outputs[0];
  if (scatter != Scatter::kNone && x.nbytes()) std::memcpy(out.raw(), x.raw(), x.nbytes());
  const int64_t last = walk.back(), src_last = src_walk.back();
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    T fill{};
    if (value) {
      auto v = ops::ScatterValueAs<T>(c.op.name, c.inputs[2], x.dtype());
      if (!v.ok()) {
        st = v.status();
        return;
      }
      fill = *v;
    }
    WithIndex(index, [&](const auto* idx) {
      T* q = out.data<T>();
      const T* p = x.data<T>();
      const T* src = value ? &fill : scatter != Scatter::kNone ? c.inputs[2].data<T>() : nullptr;
      BroadcastWalk(is, std::vector<std::vector<int64_t>>{walk, src_walk},
                    [&](const std::vector<int64_t>& off, int64_t o, int64_t len) {
                      for (int64_t i = 0; i < len; ++i) {
                        const int64_t at = off[0] + i * last + idx[o + i] * dim_stride;
                        if (scatter == Scatter::kNone) {
                          q[o + i] = p[at];
                        } else if (scatter == Scatter::kAssign) {
                          q[at] = src[off[1] + i * src_last];
                        } else if constexpr (!std::is_same_v<T, bool>) {
                          q[at] += src[off[1] + i * src_last];
                        }
                      }
                    });
    });
  });
  return st;
}

absl::Status GatherKernel(KernelCall& c) { return GatherLike(c, Scatter::kNone); }
absl::Status ScatterAddKernel(KernelCall& c) { return GatherLike(c, Scatter::kAdd); }
absl::Status ScatterKernel(KernelCall& c) { return GatherLike(c, Scatter::kAssign); }

absl::Status MaskedFillKernel(KernelCall& c) {
  const double value = c.attrs.GetFloat("value");
  TENSORD_DISPATCH_ALL(c.inputs[0].dtype(), [&] {
    T v;
    if constexpr (std::is_same_v<T, bool>) {
      v = value != 0;
    } else {
      v = static_cast<T>(value);
    }
    BinaryLoop<T, bool, T>(c.inputs[0], c.inputs[1], c.outputs[0],
                           [v](T x, bool m) { return m ? v : x; });
  });
  return absl::OkStatus();
}

absl::Status OneHotKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const int64_t n = x.numel();
  ASSIGN_OR_RETURN(int64_t classes, ops::OneHotClasses(ops::IndexValues(x),
                                                       c.attrs.GetInt("num_classes"), x.rank()));
  Tensor& out = c.outputs[0];
  if (!out.defined()) {
    Shape shape = x.shape();
    shape.push_back(classes);
    ASSIGN_OR_RETURN(out, Tensor::Empty(DType::kI64, shape, x.device(), c.account));
  }
  if (out.nbytes()) std::memset(out.raw(), 0, out.nbytes());
  int64_t* q = out.data<int64_t>();
  WithIndex(x, [&](const auto* v) {
    for (int64_t i = 0; i < n; ++i) q[i * classes + v[i]] = 1;
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterIndexingKernels(KernelTable& t) {
  t.Add("index_select", "loop_index_select", kAll, IndexSelectKernel);
  t.Add("index_add_internal", "loop_index_add", kFloatInt, IndexAddInternalKernel);
  t.Add("gather", "loop_gather", kAll, GatherKernel);
  t.Add("scatter_add_internal", "loop_scatter_add", kFloatInt, ScatterAddKernel);
  t.Add("index_add", "loop_index_add", kFloatInt, IndexAddKernel);
  t.Add("scatter", "loop_scatter", kFloatInt, ScatterKernel);
  t.Add("scatter_add", "loop_scatter_add", kFloatInt, ScatterAddKernel);
  t.Add("masked_fill", "loop_masked_fill", kAll, MaskedFillKernel);
  t.Add("one_hot", "loop_one_hot", kInt, OneHotKernel);
}

}  // namespace tensord::cpu
