#include "server/backends/cuda/cudnn_types.h"

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/core/status.h"

namespace tensord::cuda {
namespace {

// Whether every size is positive and each tensor has fewer than 2^31 elements.
bool FitsInt(std::initializer_list<const std::vector<int64_t>*> tensors) {
  for (const std::vector<int64_t>* dims : tensors) {
    int64_t n = 1;
    for (int64_t d : *dims) {
      if (d <= 0 || d > std::numeric_limits<int32_t>::max()) return false;
      if (n > std::numeric_limits<int32_t>::max() / d) return false;
      n *= d;
    }
  }
  return true;
}

std::vector<int> Ints(const std::vector<int64_t>& v) {
  return std::vector<int>(v.begin(), v.end());
}

}  // namespace

std::optional<CudnnTypes> ConvolutionTypesFor(DType dtype, MatmulPrecision precision) {
  switch (dtype) {
    case DType::kF32:
      if (precision == MatmulPrecision::kHighest) {
        return CudnnTypes{CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, true};
      }
      // TF32 allowed: cuDNN's default math takes tensor cores for f32 on Ampere and later.
      return CudnnTypes{CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, false};
    case DType::kF64:
      return CudnnTypes{CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, CUDNN_DEFAULT_MATH, false};
    case DType::kF16:
      return CudnnTypes{CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH, false};
    case DType::kBF16:
      return CudnnTypes{CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH, false};
    default:
      return std::nullopt;
  }
}

bool SumsProducts(gpu::ConvPass pass, int algo) {
  switch (pass) {
    case gpu::ConvPass::kY:
      return algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
             algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
             algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || algo == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
    case gpu::ConvPass::kX:
      return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    case gpu::ConvPass::kW:
      return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 ||
             algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
             algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
  }
  return false;
}

std::optional<CudnnDims> ConvolutionDims(const nn::Correlation& g) {
  const bool unit_first = g.xs[0] == 1 && g.ys[0] == 1 && g.k[0] == 1 && g.stride[0] == 1 &&
                          g.pad[0] == 0 && g.dil[0] == 1;
  std::vector<int64_t> x = {g.n, g.xc}, y = {g.n, g.yc}, w = {g.yc, g.cin_g};
  std::vector<int64_t> rest = {g.groups};
  CudnnDims dims;
  for (int d = unit_first ? 1 : 0; d < 3; ++d) {
    x.push_back(g.xs[d]);
    y.push_back(g.ys[d]);
    w.push_back(g.k[d]);
    rest.insert(rest.end(), {g.stride[d], g.dil[d], g.pad[d] + 1});
  }
  if (!FitsInt({&x, &y, &w})) return std::nullopt;
  for (int64_t v : rest) {
    if (v <= 0 || v > std::numeric_limits<int32_t>::max()) return std::nullopt;
  }
  dims.x = Ints(x);
  dims.y = Ints(y);
  dims.w = Ints(w);
  dims.groups = static_cast<int>(g.groups);
  for (int d = unit_first ? 1 : 0; d < 3; ++d) {
    dims.pad.push_back(static_cast<int>(g.pad[d]));
    dims.stride.push_back(static_cast<int>(g.stride[d]));
    dims.dil.push_back(static_cast<int>(g.dil[d]));
  }
  return dims;
}

std::vector<int> PackedStrides(const std::vector<int>& dims) {
  std::vector<int> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

absl::StatusOr<std::unique_ptr<ConvolutionDescriptors>> ConvolutionDescriptors::Make(
    const Cudnn& lib, const CudnnTypes& types, const CudnnDims& dims) {
  std::unique_ptr<ConvolutionDescriptors> d(new ConvolutionDescriptors(lib));
  auto check = [&](cudnnStatus_t s, const char* what) {
    if (s == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
    return Error(Reason::kInternal,
                 absl::StrCat("cuDNN refused ", what, " (", lib.GetErrorString(s), ")"));
  };
  const int nd = dims.spatial() + 2;
  RETURN_IF_ERROR(check(lib.CreateTensorDescriptor(&d->x), "a tensor descriptor"));
  RETURN_IF_ERROR(check(lib.CreateTensorDescriptor(&d->y), "a tensor descriptor"));
  RETURN_IF_ERROR(check(lib.CreateFilterDescriptor(&d->w), "a filter descriptor"));
  RETURN_IF_ERROR(check(lib.CreateConvolutionDescriptor(&d->conv), "a convolution descriptor"));
  RETURN_IF_ERROR(check(
      lib.SetTensorNdDescriptor(d->x, types.data, nd, dims.x.data(), PackedStrides(dims.x).data()),
      "the input's dims"));
  RETURN_IF_ERROR(check(
      lib.SetTensorNdDescriptor(d->y, types.data, nd, dims.y.data(), PackedStrides(dims.y).data()),
      "the output's dims"));
  RETURN_IF_ERROR(
      check(lib.SetFilterNdDescriptor(d->w, types.data, CUDNN_TENSOR_NCHW, nd, dims.w.data()),
            "the weights' dims"));
  RETURN_IF_ERROR(check(
      lib.SetConvolutionNdDescriptor(d->conv, dims.spatial(), dims.pad.data(), dims.stride.data(),
                                     dims.dil.data(), CUDNN_CROSS_CORRELATION, types.compute),
      "the convolution's geometry"));
  RETURN_IF_ERROR(check(lib.SetConvolutionGroupCount(d->conv, dims.groups), "the group count"));
  RETURN_IF_ERROR(check(lib.SetConvolutionMathType(d->conv, types.math), "the math type"));
  std::vector<int> y(nd);
  RETURN_IF_ERROR(
      check(lib.GetForwardOutputDim(d->conv, d->x, d->w, nd, y.data()), "the output's size"));
  if (y != dims.y) {
    return Error(Reason::kInternal, absl::StrCat("cuDNN's output of this convolution would be [",
                                                 absl::StrJoin(y, ", "), "], not [",
                                                 absl::StrJoin(dims.y, ", "), "]"));
  }
  return d;
}

ConvolutionDescriptors::~ConvolutionDescriptors() {
  if (x != nullptr) lib_.DestroyTensorDescriptor(x);
  if (y != nullptr) lib_.DestroyTensorDescriptor(y);
  if (w != nullptr) lib_.DestroyFilterDescriptor(w);
  if (conv != nullptr) lib_.DestroyConvolutionDescriptor(conv);
}

}  // namespace tensord::cuda
