// Loop kernels of adaptive_avg_pool2d and adaptive_max_pool2d and their gradients, after
// PyTorch's CPU kernels: the window of output (i, j) spans rows [floor(i * H / oH),
// ceil((i + 1) * H / oH)) and the same for columns; max takes the first maximum, NaN winning.
// oneDNN's pooling needs windows of one size, so these are the only kernels of the ops.
#include <algorithm>
#include <cmath>
#include <limits>

#include "server/backends/cpu/nn_kernels.h"
#include "server/ops/nn_geometry.h"

namespace tensord::cpu {
namespace {

// Calls f(plane, out_offset_in_plane, hs, he, ws, we) for every output element.
template <typename F>
void ForEachWindow(const Shape& x, const Shape& y, F f) {
  const nn::Nchw xd = nn::AsNchw(x), yd = nn::AsNchw(y);
  for (int64_t pl = 0; pl < xd.n * xd.c; ++pl) {
    for (int64_t oh = 0; oh < yd.h; ++oh) {
      const int64_t hs = nn::AdaptiveStart(oh, xd.h, yd.h);
      const int64_t he = nn::AdaptiveEnd(oh, xd.h, yd.h);
      for (int64_t ow = 0; ow < yd.w; ++ow) {
        f(pl, oh * yd.w + ow, hs, he, nn::AdaptiveStart(ow, xd.w, yd.w),
          nn::AdaptiveEnd(ow, xd.w, yd.w));
      }
    }
  }
}

// Offset in the input plane of the window's first maximum (NaN counts as the maximum).
template <typename T>
int64_t ArgMax(const T* plane, int64_t width, int64_t hs, int64_t he, int64_t ws, int64_t we) {
  int64_t best = hs * width + ws;
  T best_v = -std::numeric_limits<T>::infinity();
  for (int64_t ih = hs; ih < he; ++ih) {
    for (int64_t iw = ws; iw < we; ++iw) {
      const T v = plane[ih * width + iw];
      if (v > best_v || std::isnan(v)) {
        best_v = v;
        best = ih * width + iw;
      }
    }
  }
  return best;
}

template <typename T>
absl::Status AvgForward(KernelCall& c) {
  const Shape& xs = c.inputs[0].shape();
  const nn::Nchw xd = nn::AsNchw(xs), yd = nn::AsNchw(c.outputs[0].shape());
  const T* x = c.inputs[0].data<T>();
  T* y = c.outputs[0].data<T>();
  ForEachWindow(xs, c.outputs[0].shape(),
                [&](int64_t pl, int64_t o, int64_t hs, int64_t he, int64_t ws, int64_t we) {
                  const T* p = x + pl * xd.h * xd.w;
                  T sum = 0;
                  for (int64_t ih = hs; ih < he; ++ih) {
                    for (int64_t iw = ws; iw < we; ++iw) sum += p[ih * xd.w + iw];
                  }
                  y[pl * yd.h * yd.w + o] = sum / T((he - hs) * (we - ws));
                });
  return absl::OkStatus();
}

template <typename T>
absl::Status AvgBackward(KernelCall& c) {
  const Shape& xs = c.inputs[1].shape();
  const nn::Nchw xd = nn::AsNchw(xs), yd = nn::AsNchw(c.inputs[0].shape());
  const T* gy = c.inputs[0].data<T>();
  T* gx = c.outputs[0].data<T>();
  std::fill(gx, gx + c.outputs[0].numel(), T(0));
  ForEachWindow(xs, c.inputs[0].shape(),
                [&](int64_t pl, int64_t o, int64_t hs, int64_t he, int64_t ws, int64_t we) {
                  T* p = gx + pl * xd.h * xd.w;
                  const T g = gy[pl * yd.h * yd.w + o] / T((he - hs) * (we - ws));
                  for (int64_t ih = hs; ih < he; ++ih) {
                    for (int64_t iw = ws; iw < we; ++iw) p[ih * xd.w + iw] += g;
                  }
                });
  return absl::OkStatus();
}

template <typename T>
absl::Status MaxForward(KernelCall& c) {
  const Shape& xs = c.inputs[0].shape();
  const nn::Nchw xd = nn::AsNchw(xs), yd = nn::AsNchw(c.outputs[0].shape());
  const T* x = c.inputs[0].data<T>();
  T* y = c.outputs[0].data<T>();
  ForEachWindow(xs, c.outputs[0].shape(),
                [&](int64_t pl, int64_t o, int64_t hs, int64_t he, int64_t ws, int64_t we) {
                  const T* p = x + pl * xd.h * xd.w;
                  y[pl * yd.h * yd.w + o] = p[ArgMax(p, xd.w, hs, he, ws, we)];
                });
  return absl::OkStatus();
}

template <typename T>
absl::Status MaxBackward(KernelCall& c) {
  const Shape& xs = c.inputs[1].shape();
  const nn::Nchw xd = nn::AsNchw(xs), yd = nn::AsNchw(c.inputs[0].shape());
  const T* gy = c.inputs[0].data<T>();
  const T* x = c.inputs[1].data<T>();
  T* gx = c.outputs[0].data<T>();
  std::fill(gx, gx + c.outputs[0].numel(), T(0));
  ForEachWindow(xs, c.inputs[0].shape(),
                [&](int64_t pl, int64_t o, int64_t hs, int64_t he, int64_t ws, int64_t we) {
                  const int64_t plane = pl * xd.h * xd.w;
                  gx[plane + ArgMax(x + plane, xd.w, hs, he, ws, we)] += gy[pl * yd.h * yd.w + o];
                });
  return absl::OkStatus();
}

bool F32(const KernelCall& c) { return c.inputs[0].dtype() == DType::kF32; }

}  // namespace

// Called from RegisterConvTier2Kernels (nn_conv_tier2_kernels.cc).
void RegisterPoolTier2Kernels(KernelTable& t) {
  t.Add("adaptive_avg_pool2d", "loop_adaptive_avg_pool2d", kFloat,
        [](KernelCall& c) { return F32(c) ? AvgForward<float>(c) : AvgForward<double>(c); });
  t.Add("adaptive_avg_pool2d_backward", "loop_adaptive_avg_pool2d_backward", kFloat,
        [](KernelCall& c) { return F32(c) ? AvgBackward<float>(c) : AvgBackward<double>(c); });
  t.Add("adaptive_max_pool2d", "loop_adaptive_max_pool2d", kFloat,
        [](KernelCall& c) { return F32(c) ? MaxForward<float>(c) : MaxForward<double>(c); });
  t.Add("adaptive_max_pool2d_backward", "loop_adaptive_max_pool2d_backward", kFloat,
        [](KernelCall& c) { return F32(c) ? MaxBackward<float>(c) : MaxBackward<double>(c); });
}

}  // namespace tensord::cpu
