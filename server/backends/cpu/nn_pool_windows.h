// The loops every 2-d pooling kernel runs, whatever its windows: max pooling (forward and the
// gradient to the first maximum) and average pooling (forward and the spread-out gradient) over
// the windows of ops/nn_pool_windows.h, where max_pool2d, avg_pool2d and the adaptive pools
// differ.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "server/ops/nn_geometry.h"
#include "server/ops/nn_pool_windows.h"

namespace tensord::cpu {

using nn::PoolWindow;

// Calls f(plane, out_offset_in_plane, window) for every output element; `windows` holds the
// window of each output position (nn::PoolWindows), the same in every plane.
template <typename F>
void ForEachPoolWindow(const nn::Nchw& x, const std::vector<PoolWindow>& windows, F f) {
  for (int64_t pl = 0; pl < x.n * x.c; ++pl) {
    for (size_t o = 0; o < windows.size(); ++o) f(pl, static_cast<int64_t>(o), windows[o]);
  }
}

// Offset in the input plane of the window's first maximum; NaN counts as the maximum, as in
// PyTorch. The window's first element when every element is -inf.
template <typename T>
int64_t WindowArgMax(const T* plane, int64_t width, const PoolWindow& w) {
  int64_t best = w.hs * width + w.ws;
  T best_v = -std::numeric_limits<T>::infinity();
  for (int64_t ih = w.hs; ih < w.he; ih += w.dh) {
    for (int64_t iw = w.ws; iw < w.we; iw += w.dw) {
      const T v = plane[ih * width + iw];
      if (v > best_v || std::isnan(v)) {
        best_v = v;
        best = ih * width + iw;
      }
    }
  }
  return best;
}

// indices (null: not wanted) receives each maximum's offset in its input plane, PyTorch's
// return_indices output.
template <typename T>
void MaxPoolForward(const T* x, T* y, int64_t* indices, const nn::Nchw& xd, const nn::Nchw& yd,
                    const std::vector<PoolWindow>& windows) {
  const int64_t in_plane = xd.h * xd.w, out_plane = yd.h * yd.w;
  ForEachPoolWindow(xd, windows, [&](int64_t pl, int64_t o, const PoolWindow& w) {
    const T* p = x + pl * in_plane;
    const int64_t at = WindowArgMax(p, xd.w, w);
    y[pl * out_plane + o] = p[at];
    if (indices != nullptr) indices[pl * out_plane + o] = at;
  });
}

// gx (zeroed here) receives each output's gradient at its window's first maximum.
template <typename T>
void MaxPoolBackward(const T* gy, const T* x, T* gx, const nn::Nchw& xd, const nn::Nchw& yd,
                     const std::vector<PoolWindow>& windows) {
  const int64_t in_plane = xd.h * xd.w, out_plane = yd.h * yd.w;
  std::fill(gx, gx + xd.n * xd.c * in_plane, T(0));
  ForEachPoolWindow(xd, windows, [&](int64_t pl, int64_t o, const PoolWindow& w) {
    const int64_t plane = pl * in_plane;
    gx[plane + WindowArgMax(x + plane, xd.w, w)] += gy[pl * out_plane + o];
  });
}

template <typename T>
void AvgPoolForward(const T* x, T* y, const nn::Nchw& xd, const nn::Nchw& yd,
                    const std::vector<PoolWindow>& windows) {
  const int64_t in_plane = xd.h * xd.w, out_plane = yd.h * yd.w;
  ForEachPoolWindow(xd, windows, [&](int64_t pl, int64_t o, const PoolWindow& w) {
    const T* p = x + pl * in_plane;
    T sum = 0;
    for (int64_t ih = w.hs; ih < w.he; ih += w.dh) {
      for (int64_t iw = w.ws; iw < w.we; iw += w.dw) sum += p[ih * xd.w + iw];
    }
    y[pl * out_plane + o] = (w.hs >= w.he || w.ws >= w.we) ? T(0) : sum / T(w.divisor);
  });
}

// gx (zeroed here) receives each output's gradient divided by its divisor over its window.
template <typename T>
void AvgPoolBackward(const T* gy, T* gx, const nn::Nchw& xd, const nn::Nchw& yd,
                     const std::vector<PoolWindow>& windows) {
  const int64_t in_plane = xd.h * xd.w, out_plane = yd.h * yd.w;
  std::fill(gx, gx + xd.n * xd.c * in_plane, T(0));
  ForEachPoolWindow(xd, windows, [&](int64_t pl, int64_t o, const PoolWindow& w) {
    T* p = gx + pl * in_plane;
    const T g = gy[pl * out_plane + o] / T(w.divisor);
    for (int64_t ih = w.hs; ih < w.he; ih += w.dh) {
      for (int64_t iw = w.ws; iw < w.we; iw += w.dw) p[ih * xd.w + iw] += g;
    }
  });
}

}  // namespace tensord::cpu
