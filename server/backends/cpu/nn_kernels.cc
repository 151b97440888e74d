// Loop kernels of layer_norm, embedding and dropout (every float dtype; oneDNN takes f32
// layer_norm first), and registration of the family's other loop files.
#include "server/backends/cpu/nn_kernels.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/cpu/loops.h"
#include "server/ops/index_checks.h"
#include "server/ops/random_stream.h"

namespace tensord::cpu {
namespace {

// Splits an input of layer_norm into rows of the normalized size.
void LayerNormRows(const Tensor& x, const Attrs& a, int64_t* rows, int64_t* cols) {
  *cols = NumElements(a.GetInts("normalized_shape"));
  *rows = *cols > 0 ? x.numel() / *cols : 0;
}

template <typename T>
absl::Status LayerNormForward(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  int64_t rows, cols;
  LayerNormRows(x, c.attrs, &rows, &cols);
  const double eps = c.attrs.GetFloat("eps");
  const T* w = c.inputs.size() > 1 ? c.inputs[1].data<T>() : nullptr;
  const T* b = c.inputs.size() > 2 ? c.inputs[2].data<T>() : nullptr;
  T* y = c.outputs[0].data<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x.data<T>() + r * cols;
    T* yr = y + r * cols;
    double mean, var;
    RowMoments(xr, cols, &mean, &var);
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < cols; ++j) {
      double v = (xr[j] - mean) * rstd;
      if (w) v *= w[j];
      if (b) v += b[j];
      yr[j] = static_cast<T>(v);
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status LayerNormBackward(KernelCall& c) {
  const Tensor& gy = c.inputs[0];
  const Tensor& x = c.inputs[1];
  int64_t rows, cols;
  LayerNormRows(x, c.attrs, &rows, &cols);
  const double eps = c.attrs.GetFloat("eps");
  const T* w = c.inputs.size() > 2 ? c.inputs[2].data<T>() : nullptr;
  T* gx = c.outputs[0].data<T>();
  std::vector<double> gw(cols, 0.0), gb(cols, 0.0), gxhat(cols), xhat(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x.data<T>() + r * cols;
    const T* gr = gy.data<T>() + r * cols;
    double mean, var;
    RowMoments(xr, cols, &mean, &var);
    const double rstd = 1.0 / std::sqrt(var + eps);
    double sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < cols; ++j) {
      xhat[j] = (xr[j] - mean) * rstd;
      gxhat[j] = gr[j] * (w ? static_cast<double>(w[j]) : 1.0);
      sum_g += gxhat[j];
      sum_gx += gxhat[j] * xhat[j];
      gw[j] += gr[j] * xhat[j];
      gb[j] += gr[j];
    }
    const double mg = sum_g / cols, mgx = sum_gx / cols;
    for (int64_t j = 0; j < cols; ++j) {
      gx[r * cols + j] = static_cast<T>(rstd * (gxhat[j] - mg - xhat[j] * mgx));
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    c.outputs[1].data<T>()[j] = static_cast<T>(gw[j]);
    c.outputs[2].data<T>()[j] = static_cast<T>(gb[j]);
  }
  return absl::OkStatus();
}

template <typename I>
absl::Status EmbeddingForward(KernelCall& c) {
  const Tensor& idx = c.inputs[0];
  const Tensor& w = c.inputs[1];
  const int64_t v = w.dim(0), d = w.dim(1);
  const size_t row_bytes = static_cast<size_t>(d) * DTypeSize(w.dtype());
  const char* src = static_cast<const char*>(w.raw());
  char* dst = static_cast<char*>(c.outputs[0].raw());
  RETURN_IF_ERROR(ops::CheckEmbeddingIndices("embedding", ops::IndexValues(idx), v));
  const I* ids = idx.data<I>();
  for (int64_t i = 0, n = idx.numel(); i < n; ++i) {
    const int64_t k = static_cast<int64_t>(ids[i]);
    if (row_bytes) std::memcpy(dst + i * row_bytes, src + k * row_bytes, row_bytes);
  }
  return absl::OkStatus();
}

template <typename T, typename I>
absl::Status EmbeddingBackward(KernelCall& c) {
  const Tensor& g = c.inputs[0];
  const Tensor& idx = c.inputs[1];
  Tensor& gw = c.outputs[0];
  const int64_t v = gw.dim(0), d = gw.dim(1);
  int64_t pad = -1;  // none
  if (c.attrs.Has("padding_idx")) {
    pad = c.attrs.GetInt("padding_idx");
    if (pad < 0) pad += v;
  }
  RETURN_IF_ERROR(ops::CheckEmbeddingIndices("embedding_backward", ops::IndexValues(idx), v));
  T* out = gw.data<T>();
  std::fill(out, out + gw.numel(), T(0));
  const I* ids = idx.data<I>();
  for (int64_t i = 0, n = idx.numel(); i < n; ++i) {
    const int64_t k = static_cast<int64_t>(ids[i]);
    if (k == pad) continue;  // the padding row gets no gradient
    const T* gi = g.data<T>() + i * d;
    T* row = out + k * d;
    for (int64_t j = 0; j < d; ++j) row[j] += gi[j];
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status NativeDropout(KernelCall& c) {
  const double p = c.attrs.GetFloat("p");
  const uint64_t seed = ops::DropoutStreamStart(c.attrs.GetInt("seed"));
  // Multiplying (rather than selecting) keeps torch's NaN * 0 = NaN for dropped NaNs.
  const T scale = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
  const T* x = c.inputs[0].data<T>();
  T* y = c.outputs[0].data<T>();
  const int64_t n = c.outputs[0].numel();
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * (ops::DropoutKeep(seed, i, p) ? scale : T(0));
  return absl::OkStatus();
}

// Capability checks (ListOps) pass the primary dtype alone; calls pass every input's.
bool IndexAndFloat(absl::Span<const DType> d, const Attrs*) {
  return !d.empty() && IsInt(d[0]) && (d.size() < 2 || IsFloat(d[1]));
}
bool FloatAndIndex(absl::Span<const DType> d, const Attrs*) {
  return !d.empty() && IsFloat(d[0]) && (d.size() < 2 || IsInt(d[1]));
}

}  // namespace

absl::Status LoopLayerNorm(KernelCall& c) {
  return c.inputs[0].dtype() == DType::kF32 ? LayerNormForward<float>(c)
                                            : LayerNormForward<double>(c);
}
absl::Status LoopLayerNormBackward(KernelCall& c) {
  return c.inputs[0].dtype() == DType::kF32 ? LayerNormBackward<float>(c)
                                            : LayerNormBackward<double>(c);
}

void RegisterConvNdTransposeKernels(KernelTable& t);  // nn_conv_nd_transpose_kernels.cc

void RegisterBatchNormResampleKernels(KernelTable& t);  // nn_batch_norm_kernels.cc

void RegisterNnKernels(KernelTable& t) {
  RegisterBatchNormResampleKernels(t);
  RegisterConvKernels(t);
  RegisterConvNdTransposeKernels(t);
  RegisterPoolKernels(t);
  t.Add("layer_norm", "loop_layer_norm", kFloat, LoopLayerNorm);
  t.Add("layer_norm_backward", "loop_layer_norm_backward", kFloat, LoopLayerNormBackward);
  t.Add("embedding", Kernel{"loop_embedding", IndexAndFloat, [](KernelCall& c) {
                              return c.inputs[0].dtype() == DType::kI32
                                         ? EmbeddingForward<int32_t>(c)
                                         : EmbeddingForward<int64_t>(c);
                            }});
  t.Add("embedding_backward",
        Kernel{"loop_embedding_backward", FloatAndIndex, [](KernelCall& c) -> absl::Status {
                 const bool f32 = c.inputs[0].dtype() == DType::kF32;
                 const bool i32 = c.inputs[1].dtype() == DType::kI32;
                 if (f32) {
                   return i32 ? EmbeddingBackward<float, int32_t>(c)
                              : EmbeddingBackward<float, int64_t>(c);
                 }
                 return i32 ? EmbeddingBackward<double, int32_t>(c)
                            : EmbeddingBackward<double, int64_t>(c);
               }});
  t.Add("native_dropout", "loop_native_dropout", kFloat, [](KernelCall& c) {
    return c.inputs[0].dtype() == DType::kF32 ? NativeDropout<float>(c) : NativeDropout<double>(c);
  });
}

}  // namespace tensord::cpu
