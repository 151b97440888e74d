// Iteration helpers shared by the reduction and loss kernels. Every reduction is run in
// "block form": the input viewed as [outer, size, inner] with the middle axis reduced, so that
// the common cases (all dims, the last dim, dim 0, any run of adjacent dims) read memory in
// order without index arithmetic per element; other dim sets are first copied into that form.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/tensor.h"

namespace tensord::cpu {

// Output element (o, j) of a block reduction is at flat index o * inner + j.
struct ReduceBlock {
  int64_t outer = 1, size = 1, inner = 1;
};

// The block form of reducing `dims` of `shape` when the reduced dims are adjacent once size-1
// dims are ignored; nullopt otherwise.
std::optional<ReduceBlock> BlockForm(const Shape& shape, const std::vector<int64_t>& dims);

// For each input element, the flat index of the output element it reduces into.
std::vector<int64_t> ReductionTargets(const Shape& in, const std::vector<int64_t>& dims);

// `x` in block form: `x` itself when BlockForm applies, else a copy with the kept dims first
// and the reduced dims last (inner = 1). The copy is charged to `account`.
struct BlockInput {
  Tensor data;
  ReduceBlock block;
};
absl::StatusOr<BlockInput> ToBlockForm(const Tensor& x, const std::vector<int64_t>& dims,
                                       const std::shared_ptr<MemoryAccount>& account);

// For each output slot: acc = init, then step(acc, value, r) for r = 0..size-1 in order, then
// finish(slot, acc). With inner > 1 the accumulators of a row of slots advance together, so
// the inner loop runs over contiguous memory.
template <typename T, typename Acc, typename Step, typename Finish>
void ReduceBlocks(const T* x, const ReduceBlock& b, const Acc& init, Step step, Finish finish) {
  if (b.inner == 1) {
    for (int64_t o = 0; o < b.outer; ++o) {
      Acc a = init;
      const T* row = x + o * b.size;
      for (int64_t r = 0; r < b.size; ++r) step(a, row[r], r);
      finish(o, a);
    }
    return;
  }
  std::vector<Acc> acc(b.inner);
  for (int64_t o = 0; o < b.outer; ++o) {
    std::fill(acc.begin(), acc.end(), init);
    for (int64_t r = 0; r < b.size; ++r) {
      const T* row = x + (o * b.size + r) * b.inner;
      for (int64_t j = 0; j < b.inner; ++j) step(acc[j], row[j], r);
    }
    for (int64_t j = 0; j < b.inner; ++j) finish(o * b.inner + j, acc[j]);
  }
}

// out[slot] = sum over the slot's group of f(value, slot), accumulated in double. Contiguous
// groups use independent partial sums (a reassociation the compiler will not do by itself) so
// the adds pipeline; strided groups advance a row of slots together.
template <typename T, typename F>
void SumBlocks(const T* x, const ReduceBlock& b, F f, double* out) {
  if (b.inner == 1) {
    for (int64_t o = 0; o < b.outer; ++o) {
      const T* row = x + o * b.size;
      double s[8] = {};
      int64_t r = 0;
      for (; r + 8 <= b.size; r += 8) {
        for (int k = 0; k < 8; ++k) s[k] += f(row[r + k], o);
      }
      for (; r < b.size; ++r) s[0] += f(row[r], o);
      out[o] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    }
    return;
  }
  std::fill(out, out + b.outer * b.inner, 0.0);
  for (int64_t o = 0; o < b.outer; ++o) {
    double* acc = out + o * b.inner;
    for (int64_t r = 0; r < b.size; ++r) {
      const T* row = x + (o * b.size + r) * b.inner;
      for (int64_t j = 0; j < b.inner; ++j) acc[j] += f(row[j], o * b.inner + j);
    }
  }
}

// Calls f(i, slot) for every input element i (in order) with the output element it reduces
// into; for the backward kernels, which map per-slot values back onto the input.
template <typename F>
void ForEachReduced(const Shape& shape, const std::vector<int64_t>& dims, F f) {
  if (std::optional<ReduceBlock> b = BlockForm(shape, dims)) {
    int64_t i = 0;
    for (int64_t o = 0; o < b->outer; ++o) {
      for (int64_t r = 0; r < b->size; ++r) {
        for (int64_t j = 0; j < b->inner; ++j) f(i++, o * b->inner + j);
      }
    }
    return;
  }
  std::vector<int64_t> target = ReductionTargets(shape, dims);
  for (int64_t i = 0; i < static_cast<int64_t>(target.size()); ++i) f(i, target[i]);
}

template <typename T>
inline bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// Whether `v` replaces `best` in a max (kMax) or min search: NaN beats everything and the
// first of equal values is kept, as in PyTorch.
template <bool kMax, typename T>
inline bool Beats(T v, T best) {
  if (IsNan(best)) return false;
  if (IsNan(v)) return true;
  return kMax ? v > best : v < best;
}

// Kernel registration of the family parts.
class KernelTable;
void RegisterMinMaxKernels(KernelTable& t);
void RegisterStatisticKernels(KernelTable& t);
void RegisterLossKernels(KernelTable& t);
void RegisterCrossEntropyKernels(KernelTable& t);
void RegisterScanKernels(KernelTable& t);  // prod, cumsum, cumprod
void RegisterNormKernels(KernelTable& t);

}  // namespace tensord::cpu
