// Loop kernels for sum, mean, all, any, and the block-form helpers of every reduction kernel.
#include "server/backends/cpu/reduction_kernels.h"

#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"
#include "server/ops/reduction.h"

namespace tensord::cpu {

std::optional<ReduceBlock> BlockForm(const Shape& shape, const std::vector<int64_t>& dims) {
  ReduceBlock b;
  enum { kBefore, kInside, kAfter } state = kBefore;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    const int64_t n = shape[d];
    if (n == 1) continue;  // a size-1 dim does not change which slot an element lands in
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (reduced) {
      if (state == kAfter) return std::nullopt;
      state = kInside;
      b.size *= n;
    } else {
      if (state == kInside) state = kAfter;
      (state == kBefore ? b.outer : b.inner) *= n;
    }
  }
  return b;
}

std::vector<int64_t> ReductionTargets(const Shape& in, const std::vector<int64_t>& dims) {
  Shape kept = ReducedShape(in, dims, true);
  std::vector<int64_t> kept_strides = ContiguousStrides(kept);
  const int rank = static_cast<int>(in.size());
  std::vector<int64_t> target(NumElements(in));
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < static_cast<int64_t>(target.size()); ++i) {
    int64_t off = 0;
    for (int d = 0; d < rank; ++d) off += (kept[d] == 1 ? 0 : index[d]) * kept_strides[d];
    target[i] = off;
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < in[d]) break;
      index[d] = 0;
    }
  }
  return target;
}

absl::StatusOr<BlockInput> ToBlockForm(const Tensor& x, const std::vector<int64_t>& dims,
                                       const std::shared_ptr<MemoryAccount>& account) {
  if (std::optional<ReduceBlock> b = BlockForm(x.shape(), dims)) return BlockInput{x, *b};
  // Destination of an element: (kept index) * reduced_count + (reduced index), both row-major.
  const Shape& shape = x.shape();
  const int rank = static_cast<int>(shape.size());
  std::vector<int64_t> stride(rank, 0);
  int64_t kept_count = 1, reduced_count = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) {
      stride[d] = reduced_count;
      reduced_count *= shape[d];
    } else {
      stride[d] = kept_count;
      kept_count *= shape[d];
    }
  }
  for (int d = 0; d < rank; ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) stride[d] *= reduced_count;
  }
  ASSIGN_OR_RETURN(Tensor copy,
                   Tensor::Empty(x.dtype(), {kept_count, reduced_count}, x.device(), account));
  // Rows along the last dim are contiguous in the source and strided in the copy.
  const int64_t last = shape[rank - 1], last_stride = stride[rank - 1];
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    const T* src = x.data<T>();
    T* dst = copy.data<T>();
    std::vector<int64_t> index(rank - 1, 0);
    int64_t off = 0;
    for (int64_t row = 0; row * last < x.numel(); ++row) {
      const T* in_row = src + row * last;
      for (int64_t k = 0; k < last; ++k) dst[off + k * last_stride] = in_row[k];
      for (int d = rank - 2; d >= 0; --d) {
        off += stride[d];
        if (++index[d] < shape[d]) break;
        off -= stride[d] * shape[d];
        index[d] = 0;
      }
    }
  });
  return BlockInput{copy, ReduceBlock{kept_count, reduced_count, 1}};
}

namespace {

// A contiguous run summed with independent partial sums: the reassociation the compiler may
// not do on its own, so the adds pipeline (and vectorize).
template <typename Acc, typename T>
Acc SumRun(const T* p, int64_t n) {
  Acc s[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) s[k] += static_cast<Acc>(p[i + k]);
  }
  for (; i < n; ++i) s[0] += static_cast<Acc>(p[i]);
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// A reduction of leading and trailing dims around kept ones: x as [a, k, b], a and b reduced
// (a convolution's bias gradient sums [N, C, H, W] over N, H and W).
struct Sandwich {
  int64_t a = 1, k = 1, b = 1;
};

std::optional<Sandwich> SandwichForm(const Shape& shape, const std::vector<int64_t>& dims) {
  Sandwich s;
  enum { kLead, kKept, kTail } state = kLead;
  bool lead = false;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    const int64_t n = shape[d];
    if (n == 1) continue;
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (state == kLead && reduced) {
      s.a *= n;
      lead = true;
    } else if (state != kTail && !reduced) {
      state = kKept;
      s.k *= n;
    } else if (reduced) {
      state = kTail;
      s.b *= n;
    } else {
      return std::nullopt;  // a kept dim after the trailing reduced ones
    }
  }
  if (!lead || state != kTail) return std::nullopt;
  return s;
}

// The sum of kept slot `k`'s a * b values, in the order and with the eight partial sums of
// SumRun over the row ToBlockForm would copy them into (a-major), so the bits are the same,
// without the copy.
template <typename Acc, typename T>
Acc SumSandwichSlot(const T* x, const Sandwich& s, int64_t k) {
  Acc lane[8] = {};
  const int64_t n = s.a * s.b, full = n - n % 8;
  if (s.b % 8 == 0) {  // a row starts at a multiple of 8: its position's lane is its own
    for (int64_t a = 0; a < s.a; ++a) {
      const T* row = x + (a * s.k + k) * s.b;
      for (int64_t j = 0; j < s.b; j += 8) {
        for (int t = 0; t < 8; ++t) lane[t] += static_cast<Acc>(row[j + t]);
      }
    }
  } else {
    int64_t pos = 0;
    for (int64_t a = 0; a < s.a; ++a) {
      const T* row = x + (a * s.k + k) * s.b;
      for (int64_t j = 0; j < s.b; ++j, ++pos) {
        lane[pos < full ? (pos & 7) : 0] += static_cast<Acc>(row[j]);
      }
    }
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// sum and mean: floats accumulate in double, integers (and bool) in int64, then narrow.
absl::Status SumMeanKernel(KernelCall& c, bool mean) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  ASSIGN_OR_RETURN(auto dims, ReductionDims(c.op.name, c.attrs, x.rank()));
  if (std::optional<Sandwich> s = SandwichForm(x.shape(), dims)) {
    const double count = static_cast<double>(s->a * s->b);
    TENSORD_DISPATCH_ALL(x.dtype(), [&] {
      using In = T;
      const In* p = x.data<In>();
      TENSORD_DISPATCH_ALL(out.dtype(), [&] {
        T* q = out.data<T>();
        using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
        for (int64_t k = 0; k < s->k; ++k) {
          const Acc a = SumSandwichSlot<Acc>(p, *s, k);
          if constexpr (std::is_floating_point_v<T>) {
            q[k] = static_cast<T>(mean ? a / count : a);
          } else {
            q[k] = static_cast<T>(a);
          }
        }
      });
    });
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(BlockInput in, ToBlockForm(x, dims, c.account));
  const ReduceBlock& b = in.block;
  const double count = static_cast<double>(b.size);
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    using In = T;
    const In* p = in.data.data<In>();
    TENSORD_DISPATCH_ALL(out.dtype(), [&] {
      T* q = out.data<T>();
      using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
      auto finish = [&](int64_t slot, Acc a) {
        if constexpr (std::is_floating_point_v<T>) {
          q[slot] = static_cast<T>(mean ? a / count : a);
        } else {
          q[slot] = static_cast<T>(a);
        }
      };
      if (b.inner == 1) {
        for (int64_t o = 0; o < b.outer; ++o) finish(o, SumRun<Acc>(p + o * b.size, b.size));
      } else {
        ReduceBlocks(
            p, b, Acc{0}, [](Acc& a, In v, int64_t) { a += static_cast<Acc>(v); }, finish);
      }
    });
  });
  return absl::OkStatus();
}

template <bool kAll>
absl::Status AllAnyKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(auto dims, ReductionDims(c.op.name, c.attrs, x.rank()));
  ASSIGN_OR_RETURN(BlockInput in, ToBlockForm(x, dims, c.account));
  bool* q = c.outputs[0].data<bool>();
  // uint8_t, not bool, as the accumulator: ReduceBlocks keeps a std::vector of them.
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    ReduceBlocks(
        in.data.data<T>(), in.block, uint8_t{kAll},
        [](uint8_t& a, T v, int64_t) {
          if constexpr (kAll) {
            a = a && v != T(0);
          } else {
            a = a || v != T(0);
          }
        },
        [&](int64_t slot, uint8_t a) { q[slot] = a != 0; });
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterReductionKernels(KernelTable& t) {
  t.Add("sum", "loop_sum", kAll, [](KernelCall& c) { return SumMeanKernel(c, false); });
  t.Add("mean", "loop_mean", kFloatInt, [](KernelCall& c) { return SumMeanKernel(c, true); });
  t.Add("all", "loop_all", kAll, AllAnyKernel<true>);
  t.Add("any", "loop_any", kAll, AllAnyKernel<false>);
  RegisterMinMaxKernels(t);
  RegisterStatisticKernels(t);
  RegisterLossKernels(t);
  RegisterCrossEntropyKernels(t);
  RegisterScanKernels(t);
  RegisterNormKernels(t);
}

}  // namespace tensord::cpu
