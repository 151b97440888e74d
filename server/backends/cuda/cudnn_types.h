// What cuDNN is told of a convolution (cudnn_convolution.h), decided without a GPU: the data
// type, the compute type and the math of a dtype at the session's float32 matmul precision
// (server/core/matmul_precision.h: f32 on FMA units unless the session allows TF32, bf16 and
// f16 on tensor cores summing in f32, f64 in f64), and the dims of a correlation's tensors.
#pragma once

#include <cudnn.h>

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backends/cuda/cuda_libraries.h"
#include "server/backends/gpu/codegen/conv_source.h"
#include "server/core/dtype.h"
#include "server/core/matmul_precision.h"
#include "server/ops/nn_geometry.h"

namespace tensord::cuda {

struct CudnnTypes {
  cudnnDataType_t data;
  cudnnDataType_t compute;
  // The math the heuristics rank for.
  cudnnMathType_t math;
  // Only FMA math may run (f32 without TF32): an algorithm ranked with tensor-core math is
  // left out, and every algorithm runs with CUDNN_FMA_MATH.
  bool fma_only;
};

// nullopt for a dtype cuDNN's convolutions are not used for (integers, bool).
std::optional<CudnnTypes> ConvolutionTypesFor(DType dtype, MatmulPrecision precision);

// Whether cuDNN's algorithm `algo` for `pass` sums each output's products as they are: not an
// FFT or Winograd transform, whose results stray further from the sums (about 1e-5 relative
// in f32) than the CPU's or a GEMM's. A convolution at full precision (f32 without TF32, f64)
// runs only these; one whose session allows TF32, and f16/bf16, may run any.
bool SumsProducts(gpu::ConvPass pass, int algo);

// The tensors of a correlation as cuDNN takes them: x [n, xc, spatial...], y [n, yc, spatial...],
// the filter [yc, cin_g, k...], and per spatial dim the padding, stride and dilation. Two
// spatial dims where the first of the correlation's three is a unit one, else three. nullopt
// where a size is zero or does not fit cuDNN's ints (a tensor of 2^31 elements or more).
struct CudnnDims {
  std::vector<int> x, y, w, pad, stride, dil;
  int groups = 1;
  int spatial() const { return static_cast<int>(pad.size()); }
};
std::optional<CudnnDims> ConvolutionDims(const nn::Correlation& g);

// Dense strides of `dims`.
std::vector<int> PackedStrides(const std::vector<int>& dims);

// cuDNN's descriptors of one convolution (no GPU needed to make them), destroyed with it.
class ConvolutionDescriptors {
 public:
  // INTERNAL naming what cuDNN refused, or where its forward output of x would not be y (the
  // correlation's sizes and cuDNN's arithmetic disagree: the shape is not given to cuDNN).
  static absl::StatusOr<std::unique_ptr<ConvolutionDescriptors>> Make(const Cudnn& lib,
                                                                      const CudnnTypes& types,
                                                                      const CudnnDims& dims);
  ~ConvolutionDescriptors();
  ConvolutionDescriptors(const ConvolutionDescriptors&) = delete;
  ConvolutionDescriptors& operator=(const ConvolutionDescriptors&) = delete;

  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

 private:
  explicit ConvolutionDescriptors(const Cudnn& lib) : lib_(lib) {}
  const Cudnn& lib_;
};

}  // namespace tensord::cuda
