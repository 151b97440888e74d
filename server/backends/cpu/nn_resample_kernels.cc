// Loop kernels of upsample (interpolate's internal op) and its backward, for every float dtype
// and 1 to 3 spatial dims, over the taps of ops/nn_resample_taps.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "server/backends/cpu/kernel_table.h"
#include "server/ops/nn_resample_taps.h"

namespace tensord::cpu {
namespace {

template <typename T>
absl::Status Forward(KernelCall& c) {
  const nn::ResamplePlan<T> p =
      nn::MakeResamplePlan<T>(c.inputs[0].shape(), c.outputs[0].shape(), c.attrs);
  const nn::ResampleGeometry& g = p.g;
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
  const nn::ResamplePlan<T> p =
      nn::MakeResamplePlan<T>(c.outputs[0].shape(), c.inputs[0].shape(), c.attrs);
  const nn::ResampleGeometry& g = p.g;
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
