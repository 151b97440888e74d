// Loop kernels of native_batch_norm and its backward (every float dtype; oneDNN takes f32
// first), and registration of the resampling loop kernels. Statistics accumulate in
// double, two passes per channel.
#include <cmath>
#include <vector>

#include "server/backends/cpu/kernel_table.h"

namespace tensord::cpu {
namespace {

// [N, C, *] seen as N planes of C channels of `inner` elements.
struct ChannelLayout {
  int64_t n = 0, c = 0, inner = 1;
};
ChannelLayout ChannelsOf(const Shape& s) {
  ChannelLayout l;
  l.n = s[0];
  l.c = s[1];
  for (size_t d = 2; d < s.size(); ++d) l.inner *= s[d];
  return l;
}

template <typename T>
void ChannelMoments(const T* x, const ChannelLayout& l, int64_t ch, double* mean, double* var) {
  const int64_t count = l.n * l.inner;
  double s = 0;
  for (int64_t i = 0; i < l.n; ++i) {
    const T* p = x + (i * l.c + ch) * l.inner;
    for (int64_t j = 0; j < l.inner; ++j) s += p[j];
  }
  const double mu = count > 0 ? s / count : 0.0;
  double q = 0;
  for (int64_t i = 0; i < l.n; ++i) {
    const T* p = x + (i * l.c + ch) * l.inner;
    for (int64_t j = 0; j < l.inner; ++j) q += (p[j] - mu) * (p[j] - mu);
  }
  *mean = mu;
  *var = count > 0 ? q / count : 0.0;
}

template <typename T>
absl::Status BatchNormForward(KernelCall& c) {
  const bool training = c.attrs.GetBool("training");
  const double eps = c.attrs.GetFloat("eps");
  const ChannelLayout l = ChannelsOf(c.inputs[0].shape());
  const T* x = c.inputs[0].data<T>();
  const T* w = c.inputs[1].data<T>();
  const T* b = c.inputs[2].data<T>();
  T* y = c.outputs[0].data<T>();
  T* mean_out = c.outputs[1].data<T>();
  T* var_out = c.outputs[2].data<T>();
  for (int64_t ch = 0; ch < l.c; ++ch) {
    double mean, var;
    if (training) {
      ChannelMoments(x, l, ch, &mean, &var);
    } else {
      mean = c.inputs[3].data<T>()[ch];
      var = c.inputs[4].data<T>()[ch];
    }
    mean_out[ch] = static_cast<T>(mean);
    var_out[ch] = static_cast<T>(var);
    const double scale = w[ch] / std::sqrt(var + eps);
    const double shift = b[ch] - mean * scale;
    for (int64_t i = 0; i < l.n; ++i) {
      const int64_t off = (i * l.c + ch) * l.inner;
      for (int64_t j = 0; j < l.inner; ++j) y[off + j] = static_cast<T>(x[off + j] * scale + shift);
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status BatchNormBackward(KernelCall& c) {
  const bool training = c.attrs.GetBool("training");
  const double eps = c.attrs.GetFloat("eps");
  const ChannelLayout l = ChannelsOf(c.inputs[1].shape());
  const T* gy = c.inputs[0].data<T>();
  const T* x = c.inputs[1].data<T>();
  const T* w = c.inputs[2].data<T>();
  const T* mean = c.inputs[3].data<T>();
  const T* var = c.inputs[4].data<T>();
  T* gx = c.outputs[0].data<T>();
  T* gw = c.outputs[1].data<T>();
  T* gb = c.outputs[2].data<T>();
  const double count = static_cast<double>(l.n * l.inner);
  for (int64_t ch = 0; ch < l.c; ++ch) {
    const double mu = mean[ch];
    const double invstd = 1.0 / std::sqrt(static_cast<double>(var[ch]) + eps);
    double sum_g = 0, sum_gx = 0;  // sum(gy), sum(gy * xhat)
    for (int64_t i = 0; i < l.n; ++i) {
      const int64_t off = (i * l.c + ch) * l.inner;
      for (int64_t j = 0; j < l.inner; ++j) {
        sum_g += gy[off + j];
        sum_gx += gy[off + j] * (x[off + j] - mu) * invstd;
      }
    }
    gw[ch] = static_cast<T>(sum_gx);
    gb[ch] = static_cast<T>(sum_g);
    const double k = w[ch] * invstd;
    // Training differentiates through the batch mean and variance as well.
    const double mean_g = training && count > 0 ? sum_g / count : 0.0;
    const double mean_gx = training && count > 0 ? sum_gx / count : 0.0;
    for (int64_t i = 0; i < l.n; ++i) {
      const int64_t off = (i * l.c + ch) * l.inner;
      for (int64_t j = 0; j < l.inner; ++j) {
        const double xhat = (x[off + j] - mu) * invstd;
        gx[off + j] = static_cast<T>(k * (gy[off + j] - mean_g - xhat * mean_gx));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

void BatchNormMoments(const Tensor& x, float* mean, float* var) {
  const ChannelLayout l = ChannelsOf(x.shape());
  for (int64_t ch = 0; ch < l.c; ++ch) {
    double m, v;
    ChannelMoments(x.data<float>(), l, ch, &m, &v);
    mean[ch] = static_cast<float>(m);
    var[ch] = static_cast<float>(v);
  }
}

absl::Status LoopBatchNorm(KernelCall& c) {
  return c.inputs[0].dtype() == DType::kF32 ? BatchNormForward<float>(c)
                                            : BatchNormForward<double>(c);
}
absl::Status LoopBatchNormBackward(KernelCall& c) {
  return c.inputs[0].dtype() == DType::kF32 ? BatchNormBackward<float>(c)
                                            : BatchNormBackward<double>(c);
}

void RegisterResampleKernels(KernelTable& t);  // nn_resample_kernels.cc

// Called from RegisterNnKernels (nn_kernels.cc).
void RegisterBatchNormResampleKernels(KernelTable& t) {
  t.Add("native_batch_norm", "loop_batch_norm", kFloat, LoopBatchNorm);
  t.Add("native_batch_norm_backward", "loop_batch_norm_backward", kFloat, LoopBatchNormBackward);
  RegisterResampleKernels(t);
}

}  // namespace tensord::cpu
