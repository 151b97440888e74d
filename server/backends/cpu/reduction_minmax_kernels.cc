// Loop kernels for max, min, amax, amin, argmax, argmin and their gradients.
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"
#include "server/backends/cpu/reduction_kernels.h"
#include "server/ops/reduction.h"

namespace tensord::cpu {
namespace {

template <typename T>
struct Best {
  T value{};
  int64_t index = 0;
};

// The block form of a reduction over the optional single "dim" (absent: all, flattened).
absl::StatusOr<ReduceBlock> SingleDimBlock(const KernelCall& c, const Tensor& x) {
  if (!c.attrs.Has("dim")) return ReduceBlock{1, x.numel(), 1};
  ASSIGN_OR_RETURN(int64_t dim, NormalizeDimFor(c.op.name, c.attrs.GetInt("dim"), x.rank()));
  DimSplit s = SplitAt(x.shape(), dim);
  return ReduceBlock{s.outer, s.size, s.inner};
}

// Writes the extremum (values, when non-null) and its first index (indices, when non-null).
template <bool kMax>
absl::Status SelectKernel(KernelCall& c, Tensor* values, Tensor* indices) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(ReduceBlock b, SingleDimBlock(c, x));
  TENSORD_DISPATCH_NUMERIC(x.dtype(), [&] {
    T* v = values ? values->data<T>() : nullptr;
    int64_t* ix = indices ? indices->data<int64_t>() : nullptr;
    ReduceBlocks(
        x.data<T>(), b, Best<T>{},
        [](Best<T>& a, T e, int64_t r) {
          if (r == 0 || Beats<kMax>(e, a.value)) a = {e, r};
        },
        [&](int64_t slot, const Best<T>& a) {
          if (v) v[slot] = a.value;
          if (ix) ix[slot] = a.index;
        });
  });
  return absl::OkStatus();
}

// Extrema without indices: compare-and-select the compiler can vectorize (no branch on NaN),
// with NaNs tracked on the side and written at the end, since NaN wins as in PyTorch.
template <bool kMax, typename T>
inline T Pick(T v, T m) {
  return (kMax ? v > m : v < m) ? v : m;
}

template <bool kMax, typename T>
T ExtremumRun(const T* p, int64_t n) {
  T lane[8];
  std::fill(lane, lane + 8, p[0]);
  bool nan = false;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      lane[k] = Pick<kMax>(p[i + k], lane[k]);
      nan |= IsNan(p[i + k]);
    }
  }
  for (; i < n; ++i) {
    lane[0] = Pick<kMax>(p[i], lane[0]);
    nan |= IsNan(p[i]);
  }
  T m = lane[0];
  for (int k = 1; k < 8; ++k) m = Pick<kMax>(lane[k], m);
  if constexpr (std::is_floating_point_v<T>) {
    if (nan) return std::numeric_limits<T>::quiet_NaN();
  }
  return m;
}

// out[slot] = extremum of the slot's group; every group is non-empty (checked by the op).
template <bool kMax, typename T>
void ExtremumBlocks(const T* x, const ReduceBlock& b, T* out) {
  if (b.inner == 1) {
    for (int64_t o = 0; o < b.outer; ++o) out[o] = ExtremumRun<kMax>(x + o * b.size, b.size);
    return;
  }
  std::vector<uint8_t> nan(b.inner);
  for (int64_t o = 0; o < b.outer; ++o) {
    T* acc = out + o * b.inner;
    const T* first = x + o * b.size * b.inner;
    for (int64_t j = 0; j < b.inner; ++j) {
      acc[j] = first[j];
      nan[j] = IsNan(first[j]);
    }
    for (int64_t r = 1; r < b.size; ++r) {
      const T* row = first + r * b.inner;
      for (int64_t j = 0; j < b.inner; ++j) {
        acc[j] = Pick<kMax>(row[j], acc[j]);
        nan[j] |= IsNan(row[j]);
      }
    }
    if constexpr (std::is_floating_point_v<T>) {
      for (int64_t j = 0; j < b.inner; ++j) {
        if (nan[j]) acc[j] = std::numeric_limits<T>::quiet_NaN();
      }
    }
  }
}

template <bool kMax>
absl::Status MaxMinKernel(KernelCall& c) {
  if (c.outputs.size() > 1) return SelectKernel<kMax>(c, &c.outputs[0], &c.outputs[1]);
  const Tensor& x = c.inputs[0];
  TENSORD_DISPATCH_NUMERIC(x.dtype(), [&] {
    ExtremumBlocks<kMax>(x.data<T>(), ReduceBlock{1, x.numel(), 1}, c.outputs[0].data<T>());
  });
  return absl::OkStatus();
}

template <bool kMax>
absl::Status ArgKernel(KernelCall& c) {
  return SelectKernel<kMax>(c, nullptr, &c.outputs[0]);
}

template <bool kMax>
absl::Status AMaxKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(auto dims, ReductionDims(c.op.name, c.attrs, x.rank()));
  ASSIGN_OR_RETURN(BlockInput in, ToBlockForm(x, dims, c.account));
  TENSORD_DISPATCH_NUMERIC(x.dtype(), [&] {
    ExtremumBlocks<kMax>(in.data.data<T>(), in.block, c.outputs[0].data<T>());
  });
  return absl::OkStatus();
}

// grad (at the reduced shape), input, result -> grad of input, shared by the tied extrema.
absl::Status AMaxBackwardKernel(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  const Tensor& x = c.inputs[1];
  const Tensor& res = c.inputs[2];
  Tensor& gx = c.outputs[0];
  const bool match_nan = c.attrs.GetBool("match_nan");
  ASSIGN_OR_RETURN(auto dims, ReductionDims(c.op.name, c.attrs, x.rank()));
  std::vector<int64_t> count(res.numel(), 0);
  TENSORD_DISPATCH_FLOAT(x.dtype(), [&] {
    const T* xp = x.data<T>();
    const T* rp = res.data<T>();
    auto selected = [&](int64_t i, int64_t slot) {
      return xp[i] == rp[slot] || (match_nan && IsNan(xp[i]) && IsNan(rp[slot]));
    };
    ForEachReduced(x.shape(), dims,
                   [&](int64_t i, int64_t slot) { count[slot] += selected(i, slot); });
    TENSORD_DISPATCH_FLOAT(g.dtype(), [&] {
      const T* gp = g.data<T>();
      T* out = gx.data<T>();
      ForEachReduced(x.shape(), dims, [&](int64_t i, int64_t slot) {
        out[i] = selected(i, slot) ? gp[slot] / static_cast<T>(count[slot]) : T(0);
      });
    });
  });
  return absl::OkStatus();
}

// grad of values, indices, input -> grad of input: each gradient goes to its selected index.
absl::Status MaxDimBackwardKernel(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  const Tensor& idx = c.inputs[1];
  const Tensor& x = c.inputs[2];
  Tensor& gx = c.outputs[0];
  ASSIGN_OR_RETURN(int64_t dim, NormalizeDimFor(c.op.name, c.attrs.GetInt("dim"), x.rank()));
  const DimSplit s = SplitAt(x.shape(), dim);
  if (idx.dtype() != DType::kI64 || idx.numel() != s.outer * s.inner || g.numel() != idx.numel()) {
    return Error(Reason::kInternal, "max_dim_backward: indices do not match the gradient");
  }
  const int64_t* ip = idx.data<int64_t>();
  TENSORD_DISPATCH_FLOAT(g.dtype(), [&] {
    const T* gp = g.data<T>();
    T* out = gx.data<T>();
    std::fill(out, out + gx.numel(), T(0));
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t j = 0; j < s.inner; ++j) {
        const int64_t slot = o * s.inner + j;
        const int64_t r = ip[slot];
        if (r >= 0 && r < s.size) out[(o * s.size + r) * s.inner + j] = gp[slot];
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterMinMaxKernels(KernelTable& t) {
  t.Add("max", "loop_max", kFloatInt, MaxMinKernel<true>);
  t.Add("min", "loop_min", kFloatInt, MaxMinKernel<false>);
  t.Add("amax", "loop_amax", kFloatInt, AMaxKernel<true>);
  t.Add("amin", "loop_amin", kFloatInt, AMaxKernel<false>);
  t.Add("argmax", "loop_argmax", kFloatInt, ArgKernel<true>);
  t.Add("argmin", "loop_argmin", kFloatInt, ArgKernel<false>);
  t.Add("amax_backward", "loop_amax_backward", kFloat, AMaxBackwardKernel);
  t.Add("max_dim_backward", "loop_max_dim_backward", kFloat, MaxDimBackwardKernel);
}

}  // namespace tensord::cpu
