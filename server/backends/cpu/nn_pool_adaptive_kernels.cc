// Loop kernels of adaptive_avg_pool2d and adaptive_max_pool2d and their gradients, after
// PyTorch's CPU kernels: the adaptive window rule run by the shared pooling loops
// (nn_pool_windows.h: max takes the first maximum, NaN winning). oneDNN's pooling needs windows
// of one size, so these are the only kernels of the ops.
#include "server/backends/cpu/nn_kernels.h"
#include "server/backends/cpu/nn_pool_windows.h"
#include "server/ops/nn_geometry.h"

namespace tensord::cpu {
namespace {

// The adaptive window rule: the window of output (i, j) spans rows [floor(i * H / oH),
// ceil((i + 1) * H / oH)) and the same for columns, divided by its size.
auto AdaptiveWindows(const nn::Nchw& x, const nn::Nchw& y) {
  return [x, y](int64_t oh, int64_t ow) {
    PoolWindow w;
    w.hs = nn::AdaptiveStart(oh, x.h, y.h);
    w.he = nn::AdaptiveEnd(oh, x.h, y.h);
    w.ws = nn::AdaptiveStart(ow, x.w, y.w);
    w.we = nn::AdaptiveEnd(ow, x.w, y.w);
    w.divisor = (w.he - w.hs) * (w.we - w.ws);
    return w;
  };
}

template <typename T>
absl::Status AvgForward(KernelCall& c) {
  const nn::Nchw x = nn::AsNchw(c.inputs[0].shape()), y = nn::AsNchw(c.outputs[0].shape());
  AvgPoolForward(c.inputs[0].data<T>(), c.outputs[0].data<T>(), x, y, AdaptiveWindows(x, y));
  return absl::OkStatus();
}

template <typename T>
absl::Status AvgBackward(KernelCall& c) {
  const nn::Nchw x = nn::AsNchw(c.inputs[1].shape()), y = nn::AsNchw(c.inputs[0].shape());
  AvgPoolBackward(c.inputs[0].data<T>(), c.outputs[0].data<T>(), x, y, AdaptiveWindows(x, y));
  return absl::OkStatus();
}

template <typename T>
absl::Status MaxForward(KernelCall& c) {
  const nn::Nchw x = nn::AsNchw(c.inputs[0].shape()), y = nn::AsNchw(c.outputs[0].shape());
  MaxPoolForward(c.inputs[0].data<T>(), c.outputs[0].data<T>(), PoolIndices(c), x, y,
                 AdaptiveWindows(x, y));
  return absl::OkStatus();
}

template <typename T>
absl::Status MaxBackward(KernelCall& c) {
  const nn::Nchw x = nn::AsNchw(c.inputs[1].shape()), y = nn::AsNchw(c.inputs[0].shape());
  MaxPoolBackward(c.inputs[0].data<T>(), c.inputs[1].data<T>(), c.outputs[0].data<T>(), x, y,
                  AdaptiveWindows(x, y));
  return absl::OkStatus();
}

bool F32(const KernelCall& c) { return c.inputs[0].dtype() == DType::kF32; }

}  // namespace

// Called from RegisterConvNdTransposeKernels (nn_conv_nd_transpose_kernels.cc).
void RegisterPoolAdaptiveKernels(KernelTable& t) {
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
