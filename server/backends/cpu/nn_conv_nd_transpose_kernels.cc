// Direct-loop conv3d and conv_transpose2d with their gradients: the reference for every float
// dtype and the f64 path (and the f32 path for the calls oneDNN hands on). All six kernels are
// one correlation, y[n, o, p] += x[n, c, p * stride - padding + tap * dilation] * w[o, c, tap]
// within each group, walked from one of its three operands: a transposed convolution is the
// same correlation with its input in the `y` role and its output in the `x` role.
#include <algorithm>
#include <utility>

#include "server/backends/cpu/nn_kernels.h"
#include "server/ops/nn_geometry.h"

namespace tensord::cpu {
namespace {

// Calls f(x_offset, w_offset, y_offset) for every tap that lands inside x.
template <typename F>
void ForEachTap(const nn::Correlation& g, F f) {
  const int64_t x_plane = g.xs[0] * g.xs[1] * g.xs[2];
  const int64_t y_plane = g.ys[0] * g.ys[1] * g.ys[2];
  const int64_t taps = g.k[0] * g.k[1] * g.k[2];
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      for (int64_t oc = grp * g.cout_g; oc < (grp + 1) * g.cout_g; ++oc) {
        for (int64_t od = 0; od < g.ys[0]; ++od) {
          for (int64_t oh = 0; oh < g.ys[1]; ++oh) {
            for (int64_t ow = 0; ow < g.ys[2]; ++ow) {
              const int64_t yo = (n * g.yc + oc) * y_plane + (od * g.ys[1] + oh) * g.ys[2] + ow;
              for (int64_t ic = 0; ic < g.cin_g; ++ic) {
                const int64_t xbase = (n * g.xc + grp * g.cin_g + ic) * x_plane;
                const int64_t wbase = (oc * g.cin_g + ic) * taps;
                for (int64_t a = 0; a < g.k[0]; ++a) {
                  const int64_t id = od * g.stride[0] - g.pad[0] + a * g.dil[0];
                  if (id < 0 || id >= g.xs[0]) continue;
                  for (int64_t b = 0; b < g.k[1]; ++b) {
                    const int64_t ih = oh * g.stride[1] - g.pad[1] + b * g.dil[1];
                    if (ih < 0 || ih >= g.xs[1]) continue;
                    for (int64_t e = 0; e < g.k[2]; ++e) {
                      const int64_t iw = ow * g.stride[2] - g.pad[2] + e * g.dil[2];
                      if (iw < 0 || iw >= g.xs[2]) continue;
                      f(xbase + (id * g.xs[1] + ih) * g.xs[2] + iw,
                        wbase + (a * g.k[1] + b) * g.k[2] + e, yo);
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

// out = bias broadcast over the channel dim (zero without a bias).
template <typename T>
void FillBias(Tensor& out, const Tensor* bias, int spatial) {
  const Shape& s = out.shape();
  const size_t c_dim = s.size() - static_cast<size_t>(spatial) - 1;
  int64_t plane = 1;
  for (size_t d = c_dim + 1; d < s.size(); ++d) plane *= s[d];
  T* o = out.data<T>();
  const int64_t channels = s[c_dim];
  for (int64_t i = 0, n = out.numel(); i < n; ++i) {
    o[i] = bias ? bias->data<T>()[(i / plane) % channels] : T(0);
  }
}

struct Kind {
  int spatial;
  bool transposed;
};

template <typename T>
absl::Status Forward(KernelCall& c, Kind k) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p,
                   nn::ReadConvNdParams(c.op.name, c.attrs, k.spatial, k.transposed));
  const Tensor* bias = c.inputs.size() == 3 ? &c.inputs[2] : nullptr;
  FillBias<T>(c.outputs[0], bias, k.spatial);
  const T* in = c.inputs[0].data<T>();
  const T* w = c.inputs[1].data<T>();
  T* out = c.outputs[0].data<T>();
  if (k.transposed) {
    const nn::Correlation g =
        nn::MakeCorrelation(c.outputs[0].shape(), c.inputs[1].shape(), c.inputs[0].shape(), p);
    ForEachTap(g, [&](int64_t xo, int64_t wo, int64_t yo) { out[xo] += in[yo] * w[wo]; });
  } else {
    const nn::Correlation g =
        nn::MakeCorrelation(c.inputs[0].shape(), c.inputs[1].shape(), c.outputs[0].shape(), p);
    ForEachTap(g, [&](int64_t xo, int64_t wo, int64_t yo) { out[yo] += in[xo] * w[wo]; });
  }
  return absl::OkStatus();
}

// The input gradient (grad_output, weight) -> input_size.
template <typename T>
absl::Status BackwardInput(KernelCall& c, Kind k) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p,
                   nn::ReadConvNdParams(c.op.name, c.attrs, k.spatial, k.transposed));
  const T* gy = c.inputs[0].data<T>();
  const T* w = c.inputs[1].data<T>();
  T* gx = c.outputs[0].data<T>();
  std::fill(gx, gx + c.outputs[0].numel(), T(0));
  if (k.transposed) {
    const nn::Correlation g =
        nn::MakeCorrelation(c.inputs[0].shape(), c.inputs[1].shape(), c.outputs[0].shape(), p);
    ForEachTap(g, [&](int64_t xo, int64_t wo, int64_t yo) { gx[yo] += gy[xo] * w[wo]; });
  } else {
    const nn::Correlation g =
        nn::MakeCorrelation(c.outputs[0].shape(), c.inputs[1].shape(), c.inputs[0].shape(), p);
    ForEachTap(g, [&](int64_t xo, int64_t wo, int64_t yo) { gx[xo] += gy[yo] * w[wo]; });
  }
  return absl::OkStatus();
}

// The weight gradient (grad_output, input) -> weight_size.
template <typename T>
absl::Status BackwardWeight(KernelCall& c, Kind k) {
  ASSIGN_OR_RETURN(nn::ConvNdParams p,
                   nn::ReadConvNdParams(c.op.name, c.attrs, k.spatial, k.transposed));
  const T* gy = c.inputs[0].data<T>();
  const T* x = c.inputs[1].data<T>();
  T* gw = c.outputs[0].data<T>();
  std::fill(gw, gw + c.outputs[0].numel(), T(0));
  if (k.transposed) {
    const nn::Correlation g =
        nn::MakeCorrelation(c.inputs[0].shape(), c.outputs[0].shape(), c.inputs[1].shape(), p);
    ForEachTap(g, [&](int64_t xo, int64_t wo, int64_t yo) { gw[wo] += x[yo] * gy[xo]; });
  } else {
    const nn::Correlation g =
        nn::MakeCorrelation(c.inputs[1].shape(), c.outputs[0].shape(), c.inputs[0].shape(), p);
    ForEachTap(g, [&](int64_t xo, int64_t wo, int64_t yo) { gw[wo] += gy[yo] * x[xo]; });
  }
  return absl::OkStatus();
}

template <template <typename> class Fn>
KernelFn ByDtype(Kind k) {
  return [k](KernelCall& c) {
    return c.inputs[0].dtype() == DType::kF32 ? Fn<float>::Run(c, k) : Fn<double>::Run(c, k);
  };
}
template <typename T>
struct ForwardFn {
  static absl::Status Run(KernelCall& c, Kind k) { return Forward<T>(c, k); }
};
template <typename T>
struct InputFn {
  static absl::Status Run(KernelCall& c, Kind k) { return BackwardInput<T>(c, k); }
};
template <typename T>
struct WeightFn {
  static absl::Status Run(KernelCall& c, Kind k) { return BackwardWeight<T>(c, k); }
};

}  // namespace

void RegisterConvNdTransposeKernels(KernelTable& t) {
  for (const auto& [name, k] :
       {std::pair{"conv3d", Kind{3, false}}, std::pair{"conv_transpose2d", Kind{2, true}}}) {
    const std::string op = name;
    t.Add(op, "loop_" + op, kFloat, ByDtype<ForwardFn>(k));
    t.Add(op + "_backward_input", "loop_" + op + "_backward_input", kFloat, ByDtype<InputFn>(k));
    t.Add(op + "_backward_weight", "loop_" + op + "_backward_weight", kFloat, ByDtype<WeightFn>(k));
  }
}

}  // namespace tensord::cpu
