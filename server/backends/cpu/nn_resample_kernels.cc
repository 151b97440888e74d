// Loop kernels of upsample (interpolate's internal op) and its backward, for every float dtype
// and 1 to 3 spatial dims. Each spatial dim gets, per output index, two source taps and their
// weights computed with PyTorch's formulas (aten/src/ATen/native/UpSample.h), in the same
// precision PyTorch uses (float for nearest's scale, the input's opmath type for linear); the
// dims combine as a separable product, so nearest is the one-tap case.
#include <algorithm>
#include <cmath>
#include <vector>

#include "server/backends/cpu/kernel_table.h"

namespace tensord::cpu {
namespace {

template <typename T>
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<T> w0, w1;
};

// PyTorch's nearest_idx.
int64_t NearestSource(int64_t dst, int64_t in, int64_t out, double scale_attr) {
  if (out == in) return dst;
  if (out == 2 * in) return dst >> 1;
  const float scale = scale_attr > 0 ? static_cast<float>(1.0 / scale_attr)
                                     : static_cast<float>(in) / static_cast<float>(out);
  return std::min(static_cast<int64_t>(std::floor(static_cast<float>(dst) * scale)), in - 1);
}

template <typename T>
Taps<T> MakeTaps(int64_t in, int64_t out, double scale_attr, bool linear, bool align_corners) {
  Taps<T> t;
  t.i0.resize(out);
  t.i1.resize(out);
  t.w0.resize(out);
  t.w1.resize(out);
  T scale;
  if (align_corners) {
    scale = out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  } else {
    scale = scale_attr > 0 ? static_cast<T>(1.0 / scale_attr)
                           : static_cast<T>(in) / static_cast<T>(out);
  }
  for (int64_t o = 0; o < out; ++o) {
    if (!linear) {
      t.i0[o] = t.i1[o] = NearestSource(o, in, out, scale_attr);
      t.w0[o] = T(1);
      t.w1[o] = T(0);
      continue;
    }
    T real =
        align_corners ? scale * static_cast<T>(o) : scale * (static_cast<T>(o) + T(0.5)) - T(0.5);
    if (!align_corners && real < 0) real = 0;
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
    const T lambda = std::min(std::max(real - static_cast<T>(i0), T(0)), T(1));
    t.i0[o] = i0;
    t.i1[o] = i0 + (i0 < in - 1 ? 1 : 0);
    t.w0[o] = T(1) - lambda;
    t.w1[o] = lambda;
  }
  return t;
}

// The three innermost dims of an [N, C, *spatial] tensor, padded with leading 1s.
struct Geometry {
  int64_t planes = 1;
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
};

template <typename T>
struct Plan {
  Geometry g;
  Taps<T> taps[3];
  int ntaps = 2;
};

template <typename T>
Plan<T> MakePlan(const Shape& in_shape, const Shape& out_shape, const Attrs& a) {
  Plan<T> p;
  const size_t k = in_shape.size() - 2;
  const std::vector<double> scales = a.GetFloats("scales");
  const bool linear = a.GetString("mode") == "linear";
  const bool align = a.GetBool("align_corners");
  p.g.planes = in_shape[0] * in_shape[1];
  for (size_t i = 0; i < 3; ++i) {
    const bool real = i + k >= 3;
    const size_t d = i + k - 3;  // spatial dim for real ones
    p.g.in[i] = real ? in_shape[2 + d] : 1;
    p.g.out[i] = real ? out_shape[2 + d] : 1;
    p.taps[i] = MakeTaps<T>(p.g.in[i], p.g.out[i], real ? scales[d] : 0.0, linear && real, align);
  }
  p.ntaps = linear ? 2 : 1;
  return p;
}

template <typename T>
absl::Status Forward(KernelCall& c) {
  const Plan<T> p = MakePlan<T>(c.inputs[0].shape(), c.outputs[0].shape(), c.attrs);
  const Geometry& g = p.g;
  const int n = p.ntaps;
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* x = c.inputs[0].data<T>() + pl * in_plane;
    T* y = c.outputs[0].data<T>() + pl * out_plane;
    for (int64_t od = 0; od < g.out[0]; ++od) {
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          T acc_d = 0;
          for (int td = 0; td < n; ++td) {
            const int64_t id = td ? p.taps[0].i1[od] : p.taps[0].i0[od];
            const T wd = td ? p.taps[0].w1[od] : p.taps[0].w0[od];
            T acc_h = 0;
            for (int th = 0; th < n; ++th) {
              const int64_t ih = th ? p.taps[1].i1[oh] : p.taps[1].i0[oh];
              const T wh = th ? p.taps[1].w1[oh] : p.taps[1].w0[oh];
              const T* row = x + (id * g.in[1] + ih) * g.in[2];
              T acc_w = 0;
              for (int tw = 0; tw < n; ++tw) {
                const int64_t iw = tw ? p.taps[2].i1[ow] : p.taps[2].i0[ow];
                acc_w += (tw ? p.taps[2].w1[ow] : p.taps[2].w0[ow]) * row[iw];
              }
              acc_h += wh * acc_w;
            }
            acc_d += wd * acc_h;
          }
          *y++ = acc_d;
        }
      }
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Backward(KernelCall& c) {
  const Plan<T> p = MakePlan<T>(c.outputs[0].shape(), c.inputs[0].shape(), c.attrs);
  const Geometry& g = p.g;
  const int n = p.ntaps;
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  T* gx_all = c.outputs[0].data<T>();
  std::fill(gx_all, gx_all + c.outputs[0].numel(), T(0));
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* gy = c.inputs[0].data<T>() + pl * out_plane;
    T* gx = gx_all + pl * in_plane;
    for (int64_t od = 0; od < g.out[0]; ++od) {
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          const T v = *gy++;
          for (int td = 0; td < n; ++td) {
            const int64_t id = td ? p.taps[0].i1[od] : p.taps[0].i0[od];
            const T wd = td ? p.taps[0].w1[od] : p.taps[0].w0[od];
            for (int th = 0; th < n; ++th) {
              const int64_t ih = th ? p.taps[1].i1[oh] : p.taps[1].i0[oh];
              const T wdh = wd * (th ? p.taps[1].w1[oh] : p.taps[1].w0[oh]);
              T* row = gx + (id * g.in[1] + ih) * g.in[2];
              for (int tw = 0; tw < n; ++tw) {
                const int64_t iw = tw ? p.taps[2].i1[ow] : p.taps[2].i0[ow];
                row[iw] += wdh * (tw ? p.taps[2].w1[ow] : p.taps[2].w0[ow]) * v;
              }
            }
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoopUpsample(KernelCall& c) {
  return c.inputs[0].dtype() == DType::kF32 ? Forward<float>(c) : Forward<double>(c);
}
absl::Status LoopUpsampleBackward(KernelCall& c) {
  return c.inputs[0].dtype() == DType::kF32 ? Backward<float>(c) : Backward<double>(c);
}

void RegisterResampleKernels(KernelTable& t) {
  t.Add("upsample", "loop_upsample", kFloat, LoopUpsample);
  t.Add("upsample_backward", "loop_upsample_backward", kFloat, LoopUpsampleBackward);
}

}  // namespace tensord::cpu
