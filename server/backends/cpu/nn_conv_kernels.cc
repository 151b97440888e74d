// Direct-loop conv2d and its two gradients: the reference for every float dtype and the f64
// path. All three walk the same (n, group, out channel, output pixel, in channel, tap) nest.
#include <algorithm>

#include "server/backends/cpu/nn_kernels.h"
#include "server/ops/nn_geometry.h"

namespace tensord::cpu {
namespace {

struct ConvDims {
  nn::Nchw x, y;
  int64_t kh, kw, groups, cin_g, cout_g;
  nn::Conv2dParams p;
};

absl::StatusOr<ConvDims> Dims(const std::string& op, const Shape& x, const Shape& w, const Shape& y,
                              const Attrs& attrs) {
  ConvDims d;
  ASSIGN_OR_RETURN(d.p, nn::ReadConv2dParams(op, attrs));
  d.x = nn::AsNchw(x);
  d.y = nn::AsNchw(y);
  d.kh = w[2];
  d.kw = w[3];
  d.groups = d.p.groups;
  d.cin_g = w[1];
  d.cout_g = w[0] / d.groups;
  return d;
}

// Calls f(x_offset, w_offset, y_offset) for every (input tap, weight, output) triple.
template <typename F>
void ForEachTap(const ConvDims& d, F f) {
  const int64_t sh = d.p.stride[0], sw = d.p.stride[1];
  const int64_t ph = d.p.padding[0], pw = d.p.padding[1];
  const int64_t dh = d.p.dilation[0], dw = d.p.dilation[1];
  for (int64_t n = 0; n < d.x.n; ++n) {
    for (int64_t g = 0; g < d.groups; ++g) {
      for (int64_t oc = g * d.cout_g; oc < (g + 1) * d.cout_g; ++oc) {
        for (int64_t oh = 0; oh < d.y.h; ++oh) {
          for (int64_t ow = 0; ow < d.y.w; ++ow) {
            const int64_t yo = ((n * d.y.c + oc) * d.y.h + oh) * d.y.w + ow;
            for (int64_t ic = 0; ic < d.cin_g; ++ic) {
              const int64_t c = g * d.cin_g + ic;
              for (int64_t i = 0; i < d.kh; ++i) {
                const int64_t ih = oh * sh - ph + i * dh;
                if (ih < 0 || ih >= d.x.h) continue;
                for (int64_t j = 0; j < d.kw; ++j) {
                  const int64_t iw = ow * sw - pw + j * dw;
                  if (iw < 0 || iw >= d.x.w) continue;
                  f(((n * d.x.c + c) * d.x.h + ih) * d.x.w + iw,
                    ((oc * d.cin_g + ic) * d.kh + i) * d.kw + j, yo);
                }
              }
            }
          }
        }
      }
    }
  }
}

template <typename T>
absl::Status Forward(KernelCall& c) {
  ASSIGN_OR_RETURN(ConvDims d, Dims("conv2d", c.inputs[0].shape(), c.inputs[1].shape(),
                                    c.outputs[0].shape(), c.attrs));
  const T* x = c.inputs[0].data<T>();
  const T* w = c.inputs[1].data<T>();
  T* y = c.outputs[0].data<T>();
  const int64_t plane = d.y.h * d.y.w;
  for (int64_t n = 0; n < d.y.n; ++n) {
    for (int64_t oc = 0; oc < d.y.c; ++oc) {
      const T b = c.inputs.size() == 3 ? c.inputs[2].data<T>()[oc] : T(0);
      std::fill(y + (n * d.y.c + oc) * plane, y + (n * d.y.c + oc + 1) * plane, b);
    }
  }
  ForEachTap(d, [&](int64_t xo, int64_t wo, int64_t yo) { y[yo] += x[xo] * w[wo]; });
  return absl::OkStatus();
}

template <typename T>
absl::Status BackwardInput(KernelCall& c) {
  ASSIGN_OR_RETURN(ConvDims d, Dims("conv2d_backward_input", c.outputs[0].shape(),
                                    c.inputs[1].shape(), c.inputs[0].shape(), c.attrs));
  const T* gy = c.inputs[0].data<T>();
  const T* w = c.inputs[1].data<T>();
  T* gx = c.outputs[0].data<T>();
  std::fill(gx, gx + c.outputs[0].numel(), T(0));
  ForEachTap(d, [&](int64_t xo, int64_t wo, int64_t yo) { gx[xo] += gy[yo] * w[wo]; });
  return absl::OkStatus();
}

template <typename T>
absl::Status BackwardWeight(KernelCall& c) {
  ASSIGN_OR_RETURN(ConvDims d, Dims("conv2d_backward_weight", c.inputs[1].shape(),
                                    c.outputs[0].shape(), c.inputs[0].shape(), c.attrs));
  const T* gy = c.inputs[0].data<T>();
  const T* x = c.inputs[1].data<T>();
  T* gw = c.outputs[0].data<T>();
  std::fill(gw, gw + c.outputs[0].numel(), T(0));
  ForEachTap(d, [&](int64_t xo, int64_t wo, int64_t yo) { gw[wo] += gy[yo] * x[xo]; });
  return absl::OkStatus();
}

}  // namespace

void RegisterConvKernels(KernelTable& t) {
  t.Add("conv2d", "loop_conv2d", kFloat, [](KernelCall& c) {
    return c.inputs[0].dtype() == DType::kF32 ? Forward<float>(c) : Forward<double>(c);
  });
  t.Add("conv2d_backward_input", "loop_conv2d_backward_input", kFloat, [](KernelCall& c) {
    return c.inputs[0].dtype() == DType::kF32 ? BackwardInput<float>(c) : BackwardInput<double>(c);
  });
  t.Add("conv2d_backward_weight", "loop_conv2d_backward_weight", kFloat, [](KernelCall& c) {
    return c.inputs[0].dtype() == DType::kF32 ? BackwardWeight<float>(c)
                                              : BackwardWeight<double>(c);
  });
}

}  // namespace tensord::cpu
