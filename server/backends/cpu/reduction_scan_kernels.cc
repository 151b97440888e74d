// Loop kernels for prod, cumsum, cumprod and their gradients. Each works on lines: the input
// viewed as [outer, size, inner] around the dim (one line of every element for a full prod),
// advancing a row of `inner` accumulators together so that memory is read in order. Floats
// accumulate in double; integers and bool in 64-bit two's complement (wrapping like torch's
// int64 arithmetic, without signed-overflow UB).
#include <cstdint>

#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"
#include "server/backends/cpu/reduction_kernels.h"
#include "server/ops/reduction.h"

namespace tensord::cpu {
namespace {

template <typename Out>
using AccOf = std::conditional_t<std::is_floating_point_v<Out>, double, uint64_t>;

// An input element converted like torch's dtype argument (to the output dtype first), then
// to the accumulator.
template <typename Out, typename In>
inline AccOf<Out> Load(In v) {
  return static_cast<AccOf<Out>>(static_cast<Out>(v));
}

template <typename Out, typename Acc>
inline Out Store(Acc a) {
  if constexpr (std::is_floating_point_v<Out>) {
    return static_cast<Out>(a);
  } else {
    return static_cast<Out>(static_cast<int64_t>(a));
  }
}

// The lines of a call with an optional single "dim" (absent: one line of every element).
absl::StatusOr<DimSplit> Lines(const KernelCall& c, const Tensor& x) {
  if (!c.attrs.Has("dim")) return DimSplit{1, x.numel(), 1};
  ASSIGN_OR_RETURN(int64_t dim, NormalizeDimFor(c.op.name, c.attrs.GetInt("dim"), x.rank()));
  return x.rank() == 0 ? DimSplit{1, 1, 1} : SplitAt(x.shape(), dim);
}

// Product of a contiguous run with independent partial products, so the multiplies pipeline.
template <typename Acc, typename Out, typename In>
Acc ProdRun(const In* p, int64_t n) {
  Acc s[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) s[k] *= Load<Out>(p[i + k]);
  }
  for (; i < n; ++i) s[0] *= Load<Out>(p[i]);
  return ((s[0] * s[1]) * (s[2] * s[3])) * ((s[4] * s[5]) * (s[6] * s[7]));
}

// Runs `lines(p, q, s)` with the element types of the input (p) and of the output (q), which
// torch's dtype argument lets differ, over the lines `s` of the call.
template <typename LinesFn>
absl::Status ForwardOverLines(KernelCall& c, LinesFn lines) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  ASSIGN_OR_RETURN(DimSplit s, Lines(c, x));
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    const T* p = x.data<T>();
    TENSORD_DISPATCH_ALL(out.dtype(), [&] { lines(p, out.data<T>(), s); });
  });
  return absl::OkStatus();
}

// prod: one product per line.
struct ProdLines {
  template <typename In, typename Out>
  void operator()(const In* p, Out* q, const DimSplit& s) const {
    using Acc = AccOf<Out>;
    if (s.inner == 1) {
      for (int64_t o = 0; o < s.outer; ++o)
        q[o] = Store<Out>(ProdRun<Acc, Out>(p + o * s.size, s.size));
      return;
    }
    std::vector<Acc> acc(s.inner);
    for (int64_t o = 0; o < s.outer; ++o) {
      std::fill(acc.begin(), acc.end(), Acc{1});
      for (int64_t r = 0; r < s.size; ++r) {
        const In* row = p + (o * s.size + r) * s.inner;
        for (int64_t j = 0; j < s.inner; ++j) acc[j] *= Load<Out>(row[j]);
      }
      for (int64_t j = 0; j < s.inner; ++j) q[o * s.inner + j] = Store<Out>(acc[j]);
    }
  }
};

// cumsum (kProd = false) and cumprod along "dim": every prefix of every line.
template <bool kProd>
struct ScanLines {
  template <typename In, typename Out>
  void operator()(const In* p, Out* q, const DimSplit& s) const {
    using Acc = AccOf<Out>;
    std::vector<Acc> acc(s.inner);
    for (int64_t o = 0; o < s.outer; ++o) {
      std::fill(acc.begin(), acc.end(), Acc{kProd ? 1 : 0});
      for (int64_t r = 0; r < s.size; ++r) {
        const int64_t base = (o * s.size + r) * s.inner;
        for (int64_t j = 0; j < s.inner; ++j) {
          if constexpr (kProd) {
            acc[j] *= Load<Out>(p[base + j]);
          } else {
            acc[j] += Load<Out>(p[base + j]);
          }
          q[base + j] = Store<Out>(acc[j]);
        }
      }
    }
  }
};

absl::Status ProdKernel(KernelCall& c) { return ForwardOverLines(c, ProdLines{}); }

template <bool kProd>
absl::Status ScanKernel(KernelCall& c) {
  return ForwardOverLines(c, ScanLines<kProd>{});
}

// cumsum's gradient: the running sum of the gradient from the end of each line.
absl::Status CumsumBackwardKernel(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  ASSIGN_OR_RETURN(DimSplit s, Lines(c, g));
  TENSORD_DISPATCH_FLOAT(g.dtype(), [&] {
    const T* gp = g.data<T>();
    T* q = c.outputs[0].data<T>();
    std::vector<double> acc(s.inner);
    for (int64_t o = 0; o < s.outer; ++o) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t r = s.size - 1; r >= 0; --r) {
        const int64_t base = (o * s.size + r) * s.inner;
        for (int64_t j = 0; j < s.inner; ++j) {
          acc[j] += gp[base + j];
          q[base + j] = static_cast<T>(acc[j]);
        }
      }
    }
  });
  return absl::OkStatus();
}

// The gradients of prod and cumprod along lines, without dividing by the input:
//   prod:    gx_i = g * P_i * Q_i, with P_i = prod_{m<i} x_m and Q_i = prod_{m>i} x_m;
//   cumprod: gx_i = P_i * S_i, with S_i = sum_{j>=i} g_j prod_{i<m<=j} x_m, computed from the
//            end as S_i = g_i + x_{i+1} S_{i+1}.
// Both are exact with any number of zeros in a line, where result / x would be 0 / 0. The
// prefix products are parked in the output (no temporary of the input's size), then scaled
// on the way back.
template <bool kCumulative>
absl::Status ProductBackwardKernel(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  const Tensor& x = c.inputs[1];
  ASSIGN_OR_RETURN(DimSplit s, Lines(c, x));
  const int64_t slots = s.outer * s.inner;
  if (g.numel() != (kCumulative ? x.numel() : slots)) {
    return Error(Reason::kInternal,
                 absl::StrCat(c.op.name, ": gradient of shape ", ShapeToString(g.shape()),
                              " does not match the input ", ShapeToString(x.shape())));
  }
  TENSORD_DISPATCH_FLOAT(x.dtype(), [&] {
    const T* xp = x.data<T>();
    const T* gp = g.data<T>();
    T* q = c.outputs[0].data<T>();
    std::vector<double> acc(s.inner);
    for (int64_t o = 0; o < s.outer; ++o) {
      const int64_t line = o * s.size * s.inner;
      std::fill(acc.begin(), acc.end(), 1.0);
      for (int64_t r = 0; r < s.size; ++r) {
        for (int64_t j = 0; j < s.inner; ++j) {
          const int64_t i = line + r * s.inner + j;
          q[i] = static_cast<T>(acc[j]);
          acc[j] *= xp[i];
        }
      }
      // acc: Q_i (prod) or S_i (cumprod), advanced from the end of the line.
      std::fill(acc.begin(), acc.end(), kCumulative ? 0.0 : 1.0);
      for (int64_t r = s.size - 1; r >= 0; --r) {
        for (int64_t j = 0; j < s.inner; ++j) {
          const int64_t i = line + r * s.inner + j;
          const double prefix = q[i];
          if constexpr (kCumulative) {
            const double next = r + 1 < s.size ? xp[i + s.inner] : 0.0;
            acc[j] = gp[i] + next * acc[j];
            q[i] = static_cast<T>(prefix * acc[j]);
          } else {
            q[i] = static_cast<T>(gp[o * s.inner + j] * prefix * acc[j]);
            acc[j] *= xp[i];
          }
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterScanKernels(KernelTable& t) {
  t.Add("prod", "loop_prod", kAll, ProdKernel);
  t.Add("cumsum", "loop_cumsum", kAll, ScanKernel<false>);
  t.Add("cumprod", "loop_cumprod", kAll, ScanKernel<true>);
  t.Add("prod_backward", "loop_prod_backward", kFloat, ProductBackwardKernel<false>);
  t.Add("cumsum_backward", "loop_cumsum_backward", kFloat, CumsumBackwardKernel);
  t.Add("cumprod_backward", "loop_cumprod_backward", kFloat, ProductBackwardKernel<true>);
}

}  // namespace tensord::cpu
