// Vectorizable loops for the kernels oneDNN does not cover. Contiguous same-shape operands take
// a flat loop the compiler vectorizes; broadcasting falls back to an N-d index walk that keeps
// the innermost dimension as a flat run. An output of ParallelElements() or more (at least
// 64Ki elements, more where a parallel region costs more: parallel_regions.h) is shared out
// among the intra-op threads (--threads, OpenMP as oneDNN's) in contiguous blocks; every element
// is computed as one thread computes it, so the bits do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "server/backends/cpu/parallel_regions.h"
#include "server/core/tensor.h"

namespace tensord::cpu {

inline constexpr int64_t kParallelBlock = int64_t{1} << 14;  // elements per share

// Calls body(begin, end) over [0, n) in blocks of `block`, shared by the intra-op threads.
template <typename Body>
void SharedBlocks(int64_t n, int64_t block, Body& body) {
  const int64_t blocks = (n + block - 1) / block;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) body(b * block, std::min(n, (b + 1) * block));
}

// Calls body(begin, end) over [0, n): once for a small n, else in shared blocks.
template <typename Body>
void ForBlocks(int64_t n, Body body) {
  if (n < ParallelElements()) {
    body(int64_t{0}, n);
    return;
  }
  SharedBlocks(n, kParallelBlock, body);
}

// Whether F computes a contiguous f32 run at once: F::Run(const float*, float*, int64_t).
template <typename F, typename = void>
struct RunsF32 : std::false_type {};
template <typename F>
struct RunsF32<F, std::void_t<decltype(F::Run(static_cast<const float*>(nullptr),
                                              static_cast<float*>(nullptr), int64_t{0}))>>
    : std::true_type {};

// out[i] = f(in[i]).
template <typename In, typename Out, typename F>
void UnaryLoop(const Tensor& in, Tensor& out, F f) {
  const In* x = in.data<In>();
  Out* y = out.data<Out>();
  ForBlocks(out.numel(), [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<In, float> && std::is_same_v<Out, float> && RunsF32<F>::value) {
      F::Run(x + begin, y + begin, end - begin);
    } else {
      for (int64_t i = begin; i < end; ++i) y[i] = f(x[i]);
    }
  });
}

// Calls body(offsets, out_index, run_length) for the rows [first, last) of the output (runs
// along the last dim), with `offsets[k]` the element offset into operand k for the first
// element of the run.
template <typename Body>
void WalkRows(const Shape& out_shape, const std::vector<std::vector<int64_t>>& strides,
              int64_t first, int64_t last, Body& body) {
  if (first >= last) return;  // also every empty output: no dimension is divided by
  const int rank = static_cast<int>(out_shape.size());
  const size_t k = strides.size();
  std::vector<int64_t> offsets(k, 0);
  if (rank == 0) {
    body(offsets, int64_t{0}, int64_t{1});
    return;
  }
  const int64_t inner = out_shape[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t r = first;
  for (int d = rank - 2; d >= 0; --d) {
    index[d] = r % out_shape[d];
    r /= out_shape[d];
  }
  for (int64_t row = first; row < last; ++row) {
    for (size_t j = 0; j < k; ++j) {
      int64_t off = 0;
      for (int d = 0; d < rank - 1; ++d) off += index[d] * strides[j][d];
      offsets[j] = off;
    }
    body(offsets, row * inner, inner);
    for (int d = rank - 2; d >= 0; --d) {
      if (++index[d] < out_shape[d]) break;
      index[d] = 0;
    }
  }
}

// The number of runs WalkRows walks for `out_shape`.
inline int64_t RowCount(const Shape& out_shape) {
  const int64_t n = NumElements(out_shape);
  if (n == 0) return 0;
  return out_shape.empty() ? 1 : n / out_shape.back();
}

// Every run of the output in order, on the calling thread (a body may accumulate).
template <typename Body>
void BroadcastWalk(const Shape& out_shape, const std::vector<std::vector<int64_t>>& strides,
                   Body body) {
  WalkRows(out_shape, strides, 0, RowCount(out_shape), body);
}

// Every run of the output once, runs shared among the intra-op threads for a large output: the
// body must write only its own run of the output.
template <typename Body>
void ParallelBroadcastWalk(const Shape& out_shape, const std::vector<std::vector<int64_t>>& strides,
                           Body body) {
  const int64_t rows = RowCount(out_shape);
  if (rows < 2 || NumElements(out_shape) < ParallelElements()) {
    WalkRows(out_shape, strides, 0, rows, body);
    return;
  }
  auto walk = [&](int64_t first, int64_t last) { WalkRows(out_shape, strides, first, last, body); };
  SharedBlocks(rows, std::max<int64_t>(1, kParallelBlock / out_shape.back()), walk);
}

// out = f(a, b) with broadcasting. A, B: input element types; Out: output type.
template <typename A, typename B, typename Out, typename F>
void BinaryLoop(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const A* x = a.data<A>();
  const B* y = b.data<B>();
  Out* z = out.data<Out>();
  const int64_t n = out.numel();
  if (a.shape() == out.shape() && b.shape() == out.shape()) {
    ForBlocks(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) z[i] = f(x[i], y[i]);
    });
    return;
  }
  if (a.shape() == out.shape() && b.numel() == 1) {
    const B s = y[0];
    ForBlocks(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) z[i] = f(x[i], s);
    });
    return;
  }
  if (b.shape() == out.shape() && a.numel() == 1) {
    const A s = x[0];
    ForBlocks(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) z[i] = f(s, y[i]);
    });
    return;
  }
  std::vector<std::vector<int64_t>> strides = {BroadcastStrides(a.shape(), out.shape()),
                                               BroadcastStrides(b.shape(), out.shape())};
  const int64_t sa = strides[0].empty() ? 0 : strides[0].back();
  const int64_t sb = strides[1].empty() ? 0 : strides[1].back();
  ParallelBroadcastWalk(out.shape(), strides,
                        [&](const std::vector<int64_t>& off, int64_t o, int64_t len) {
                          const A* xa = x + off[0];
                          const B* yb = y + off[1];
                          for (int64_t i = 0; i < len; ++i) z[o + i] = f(xa[i * sa], yb[i * sb]);
                        });
}

// out = f(a, b, c) with broadcasting (where, lerp, clamp with tensor bounds).
template <typename A, typename B, typename C, typename Out, typename F>
void TernaryLoop(const Tensor& a, const Tensor& b, const Tensor& c, Tensor& out, F f) {
  const A* x = a.data<A>();
  const B* y = b.data<B>();
  const C* w = c.data<C>();
  Out* z = out.data<Out>();
  std::vector<std::vector<int64_t>> strides = {BroadcastStrides(a.shape(), out.shape()),
                                               BroadcastStrides(b.shape(), out.shape()),
                                               BroadcastStrides(c.shape(), out.shape())};
  const int64_t sa = strides[0].empty() ? 0 : strides[0].back();
  const int64_t sb = strides[1].empty() ? 0 : strides[1].back();
  const int64_t sc = strides[2].empty() ? 0 : strides[2].back();
  ParallelBroadcastWalk(
      out.shape(), strides, [&](const std::vector<int64_t>& off, int64_t o, int64_t len) {
        for (int64_t i = 0; i < len; ++i) {
          z[o + i] = f(x[off[0] + i * sa], y[off[1] + i * sb], w[off[2] + i * sc]);
        }
      });
}

// Splits `shape` around `dim` into (outer, size, inner) for reductions and scans along a dim.
struct DimSplit {
  int64_t outer = 1, size = 1, inner = 1;
};
inline DimSplit SplitAt(const Shape& shape, int64_t dim) {
  DimSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim)
      s.outer *= shape[d];
    else if (d == dim)
      s.size = shape[d];
    else
      s.inner *= shape[d];
  }
  return s;
}

}  // namespace tensord::cpu
