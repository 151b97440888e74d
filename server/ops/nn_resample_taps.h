// The taps of upsample (interpolate's internal op): per spatial dim and output index, two
// source indices and their weights, with PyTorch's formulas (aten/src/ATen/native/UpSample.h)
// in the precision PyTorch uses (float for nearest's scale, the input's opmath type for
// linear). The dims combine as a separable product, so nearest is the one-tap case. Every
// backend computes them here and runs the same taps.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "server/core/shape.h"
#include "server/ops/attrs.h"

namespace tensord::nn {

template <typename T>
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<T> w0, w1;
};

// PyTorch's nearest_idx.
inline int64_t NearestSource(int64_t dst, int64_t in, int64_t out, double scale_attr) {
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
struct ResampleGeometry {
  int64_t planes = 1;
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
};

template <typename T>
struct ResamplePlan {
  ResampleGeometry g;
  Taps<T> taps[3];
  int ntaps = 2;
};

template <typename T>
ResamplePlan<T> MakeResamplePlan(const Shape& in_shape, const Shape& out_shape, const Attrs& a) {
  ResamplePlan<T> p;
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

}  // namespace tensord::nn
