// Loop max/avg pooling and their gradients, written after PyTorch's CPU kernels so that window
// clipping, the avg divisor (count_include_pad, divisor_override, ceil_mode) and the max tie
// and NaN rules match exactly. The reference for every float dtype and the f64 path.
#include <cmath>
#include <limits>

#include "server/backends/cpu/nn_kernels.h"
#include "server/ops/nn_geometry.h"

namespace tensord::cpu {
namespace {

struct PoolDims {
  nn::Nchw x, y;
  nn::Pool2dParams p;
};

absl::StatusOr<PoolDims> Dims(const std::string& op, const Shape& x, const Shape& y,
                              const Attrs& attrs, bool max_pool) {
  PoolDims d;
  ASSIGN_OR_RETURN(d.p, nn::ReadPool2dParams(op, attrs, max_pool));
  d.x = nn::AsNchw(x);
  d.y = nn::AsNchw(y);
  return d;
}

// Calls f(plane_index, out_offset_in_plane, argmax_offset_in_input_plane) per output element;
// the argmax is the first maximum, NaN winning as in PyTorch.
template <typename T, typename F>
void MaxWindows(const PoolDims& d, const T* x, F f) {
  const int64_t planes = d.x.n * d.x.c;
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* xp = x + pl * d.x.h * d.x.w;
    for (int64_t oh = 0; oh < d.y.h; ++oh) {
      int64_t hs = oh * d.p.stride[0] - d.p.padding[0];
      while (hs < 0) hs += d.p.dilation[0];
      const int64_t he = std::min(
          oh * d.p.stride[0] - d.p.padding[0] + (d.p.kernel[0] - 1) * d.p.dilation[0] + 1, d.x.h);
      for (int64_t ow = 0; ow < d.y.w; ++ow) {
        int64_t ws = ow * d.p.stride[1] - d.p.padding[1];
        while (ws < 0) ws += d.p.dilation[1];
        const int64_t we = std::min(
            ow * d.p.stride[1] - d.p.padding[1] + (d.p.kernel[1] - 1) * d.p.dilation[1] + 1, d.x.w);
        int64_t best = hs * d.x.w + ws;
        T best_v = -std::numeric_limits<T>::infinity();
        for (int64_t ih = hs; ih < he; ih += d.p.dilation[0]) {
          for (int64_t iw = ws; iw < we; iw += d.p.dilation[1]) {
            const T v = xp[ih * d.x.w + iw];
            if (v > best_v || std::isnan(v)) {
              best_v = v;
              best = ih * d.x.w + iw;
            }
          }
        }
        f(pl, oh * d.y.w + ow, best, best_v);
      }
    }
  }
}

// Calls f(plane, out_offset, hs, he, ws, we, divisor) per output element with the window
// clipped to the input, as PyTorch's avg_pool2d.
template <typename F>
void AvgWindows(const PoolDims& d, const Attrs& attrs, F f) {
  const bool include_pad = attrs.GetBool("count_include_pad", true);
  const bool has_override = attrs.Has("divisor_override");
  const int64_t override_v = attrs.GetInt("divisor_override", 1);
  const int64_t planes = d.x.n * d.x.c;
  for (int64_t pl = 0; pl < planes; ++pl) {
    for (int64_t oh = 0; oh < d.y.h; ++oh) {
      for (int64_t ow = 0; ow < d.y.w; ++ow) {
        int64_t hs = oh * d.p.stride[0] - d.p.padding[0];
        int64_t ws = ow * d.p.stride[1] - d.p.padding[1];
        int64_t he = std::min(hs + d.p.kernel[0], d.x.h + d.p.padding[0]);
        int64_t we = std::min(ws + d.p.kernel[1], d.x.w + d.p.padding[1]);
        const int64_t pool_size = (he - hs) * (we - ws);
        hs = std::max<int64_t>(hs, 0);
        ws = std::max<int64_t>(ws, 0);
        he = std::min(he, d.x.h);
        we = std::min(we, d.x.w);
        const int64_t divisor = has_override  ? override_v
                                : include_pad ? pool_size
                                              : (he - hs) * (we - ws);
        f(pl, oh * d.y.w + ow, hs, he, ws, we, divisor);
      }
    }
  }
}

template <typename T>
absl::Status MaxForward(KernelCall& c) {
  ASSIGN_OR_RETURN(PoolDims d,
                   Dims("max_pool2d", c.inputs[0].shape(), c.outputs[0].shape(), c.attrs, true));
  T* y = c.outputs[0].data<T>();
  const int64_t out_plane = d.y.h * d.y.w;
  MaxWindows<T>(d, c.inputs[0].data<T>(),
                [&](int64_t pl, int64_t o, int64_t, T v) { y[pl * out_plane + o] = v; });
  return absl::OkStatus();
}

template <typename T>
absl::Status MaxBackward(KernelCall& c) {
  ASSIGN_OR_RETURN(PoolDims d, Dims("max_pool2d_backward", c.inputs[1].shape(), c.inputs[0].shape(),
                                    c.attrs, true));
  const T* gy = c.inputs[0].data<T>();
  T* gx = c.outputs[0].data<T>();
  std::fill(gx, gx + c.outputs[0].numel(), T(0));
  const int64_t in_plane = d.x.h * d.x.w, out_plane = d.y.h * d.y.w;
  MaxWindows<T>(d, c.inputs[1].data<T>(), [&](int64_t pl, int64_t o, int64_t best, T) {
    gx[pl * in_plane + best] += gy[pl * out_plane + o];
  });
  return absl::OkStatus();
}

template <typename T>
absl::Status AvgForward(KernelCall& c) {
  ASSIGN_OR_RETURN(PoolDims d,
                   Dims("avg_pool2d", c.inputs[0].shape(), c.outputs[0].shape(), c.attrs, false));
  const T* x = c.inputs[0].data<T>();
  T* y = c.outputs[0].data<T>();
  const int64_t in_plane = d.x.h * d.x.w, out_plane = d.y.h * d.y.w;
  AvgWindows(
      d, c.attrs,
      [&](int64_t pl, int64_t o, int64_t hs, int64_t he, int64_t ws, int64_t we, int64_t divisor) {
        T sum = 0;
        for (int64_t ih = hs; ih < he; ++ih) {
          for (int64_t iw = ws; iw < we; ++iw) sum += x[pl * in_plane + ih * d.x.w + iw];
        }
        y[pl * out_plane + o] = (hs >= he || ws >= we) ? T(0) : sum / T(divisor);
      });
  return absl::OkStatus();
}

template <typename T>
absl::Status AvgBackward(KernelCall& c) {
  ASSIGN_OR_RETURN(PoolDims d, Dims("avg_pool2d_backward", c.inputs[1].shape(), c.inputs[0].shape(),
                                    c.attrs, false));
  const T* gy = c.inputs[0].data<T>();
  T* gx = c.outputs[0].data<T>();
  std::fill(gx, gx + c.outputs[0].numel(), T(0));
  const int64_t in_plane = d.x.h * d.x.w, out_plane = d.y.h * d.y.w;
  AvgWindows(
      d, c.attrs,
      [&](int64_t pl, int64_t o, int64_t hs, int64_t he, int64_t ws, int64_t we, int64_t divisor) {
        const T g = gy[pl * out_plane + o] / T(divisor);
        for (int64_t ih = hs; ih < he; ++ih) {
          for (int64_t iw = ws; iw < we; ++iw) gx[pl * in_plane + ih * d.x.w + iw] += g;
        }
      });
  return absl::OkStatus();
}

}  // namespace

absl::Status LoopMaxPool2d(KernelCall& c) {
  return c.inputs[0].dtype() == DType::kF32 ? MaxForward<float>(c) : MaxForward<double>(c);
}
absl::Status LoopMaxPool2dBackward(KernelCall& c) {
  return c.inputs[0].dtype() == DType::kF32 ? MaxBackward<float>(c) : MaxBackward<double>(c);
}
absl::Status LoopAvgPool2d(KernelCall& c) {
  return c.inputs[0].dtype() == DType::kF32 ? AvgForward<float>(c) : AvgForward<double>(c);
}
absl::Status LoopAvgPool2dBackward(KernelCall& c) {
  return c.inputs[0].dtype() == DType::kF32 ? AvgBackward<float>(c) : AvgBackward<double>(c);
}

void RegisterPoolKernels(KernelTable& t) {
  t.Add("max_pool2d", "loop_max_pool2d", kFloat, LoopMaxPool2d);
  t.Add("max_pool2d_backward", "loop_max_pool2d_backward", kFloat, LoopMaxPool2dBackward);
  t.Add("avg_pool2d", "loop_avg_pool2d", kFloat, LoopAvgPool2d);
  t.Add("avg_pool2d_backward", "loop_avg_pool2d_backward", kFloat, LoopAvgPool2dBackward);
}

}  // namespace tensord::cpu
