// Loop max/avg pooling and their gradients: the window rules of max_pool2d and avg_pool2d,
// written after PyTorch's CPU kernels so that window clipping and the avg divisor
// (count_include_pad, divisor_override, ceil_mode) match exactly, run by the shared pooling loops
// (nn_pool_windows.h, which also hold the max tie and NaN rule). The reference for every float
// dtype and the f64 path.
#include <algorithm>

#include "server/backends/cpu/nn_kernels.h"
#include "server/backends/cpu/nn_pool_windows.h"
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

// max_pool2d's window rule: the window of (oh, ow) clipped to the input, its start moved in by
// whole dilation steps.
auto MaxWindows(const PoolDims& d) {
  return [&d](int64_t oh, int64_t ow) {
    PoolWindow w;
    w.dh = d.p.dilation[0];
    w.dw = d.p.dilation[1];
    w.hs = oh * d.p.stride[0] - d.p.padding[0];
    while (w.hs < 0) w.hs += w.dh;
    w.he = std::min(oh * d.p.stride[0] - d.p.padding[0] + (d.p.kernel[0] - 1) * w.dh + 1, d.x.h);
    w.ws = ow * d.p.stride[1] - d.p.padding[1];
    while (w.ws < 0) w.ws += w.dw;
    w.we = std::min(ow * d.p.stride[1] - d.p.padding[1] + (d.p.kernel[1] - 1) * w.dw + 1, d.x.w);
    return w;
  };
}

// avg_pool2d's window rule, as PyTorch's: the window clipped to the input, divided by
// divisor_override, or by the window's size counting the padding it covers
// (count_include_pad), or by the elements it covers.
auto AvgWindows(const PoolDims& d, const Attrs& attrs) {
  const bool include_pad = attrs.GetBool("count_include_pad");
  const bool has_override = attrs.Has("divisor_override");
  const int64_t override_v = attrs.GetInt("divisor_override");
  return [&d, include_pad, has_override, override_v](int64_t oh, int64_t ow) {
    PoolWindow w;
    w.hs = oh * d.p.stride[0] - d.p.padding[0];
    w.ws = ow * d.p.stride[1] - d.p.padding[1];
    w.he = std::min(w.hs + d.p.kernel[0], d.x.h + d.p.padding[0]);
    w.we = std::min(w.ws + d.p.kernel[1], d.x.w + d.p.padding[1]);
    const int64_t pool_size = (w.he - w.hs) * (w.we - w.ws);
    w.hs = std::max<int64_t>(w.hs, 0);
    w.ws = std::max<int64_t>(w.ws, 0);
    w.he = std::min(w.he, d.x.h);
    w.we = std::min(w.we, d.x.w);
    w.divisor = has_override ? override_v : include_pad ? pool_size : (w.he - w.hs) * (w.we - w.ws);
    return w;
  };
}

template <typename T>
absl::Status MaxForward(KernelCall& c) {
  ASSIGN_OR_RETURN(PoolDims d,
                   Dims("max_pool2d", c.inputs[0].shape(), c.outputs[0].shape(), c.attrs, true));
  MaxPoolForward(c.inputs[0].data<T>(), c.outputs[0].data<T>(), PoolIndices(c), d.x, d.y,
                 MaxWindows(d));
  return absl::OkStatus();
}

template <typename T>
absl::Status MaxBackward(KernelCall& c) {
  ASSIGN_OR_RETURN(PoolDims d, Dims("max_pool2d_backward", c.inputs[1].shape(), c.inputs[0].shape(),
                                    c.attrs, true));
  MaxPoolBackward(c.inputs[0].data<T>(), c.inputs[1].data<T>(), c.outputs[0].data<T>(), d.x, d.y,
                  MaxWindows(d));
  return absl::OkStatus();
}

template <typename T>
absl::Status AvgForward(KernelCall& c) {
  ASSIGN_OR_RETURN(PoolDims d,
                   Dims("avg_pool2d", c.inputs[0].shape(), c.outputs[0].shape(), c.attrs, false));
  AvgPoolForward(c.inputs[0].data<T>(), c.outputs[0].data<T>(), d.x, d.y, AvgWindows(d, c.attrs));
  return absl::OkStatus();
}

template <typename T>
absl::Status AvgBackward(KernelCall& c) {
  ASSIGN_OR_RETURN(PoolDims d, Dims("avg_pool2d_backward", c.inputs[1].shape(), c.inputs[0].shape(),
                                    c.attrs, false));
  AvgPoolBackward(c.inputs[0].data<T>(), c.outputs[0].data<T>(), d.x, d.y, AvgWindows(d, c.attrs));
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
