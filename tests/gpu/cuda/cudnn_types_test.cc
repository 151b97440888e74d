// What cuDNN is told of a convolution (server/backends/cuda/cudnn_types.h), which needs no GPU to
// check: the types and math of each dtype at each float32 matmul precision, and the dims of a
// correlation's tensors as cuDNN takes them (2-d, 3-d, a 1-d convolution through 2-d, groups,
// transposed roles, sizes past cuDNN's ints). And the cuDNN of the toolkit loads with every
// symbol the convolutions bind.
#include "server/backends/cuda/cudnn_types.h"

#include <dlfcn.h>

#include "gtest/gtest.h"
#include "server/backends/cuda/cuda_libraries.h"

namespace tensord::cuda {
namespace {

using Ints = std::vector<int>;

nn::Correlation Correlation(const Shape& x, const Shape& w, const Shape& y, int spatial,
                            std::vector<int64_t> stride, std::vector<int64_t> padding,
                            std::vector<int64_t> dilation, int64_t groups = 1) {
  nn::ConvNdParams p;
  p.spatial = spatial;
  p.stride = std::move(stride);
  p.padding = std::move(padding);
  p.dilation = std::move(dilation);
  p.groups = groups;
  return nn::MakeCorrelation(x, w, y, p);
}

TEST(CudnnTypes, F32UsesFmaUnitsUnlessTheSessionAllowsTf32) {
  std::optional<CudnnTypes> t = ConvolutionTypesFor(DType::kF32, MatmulPrecision::kHighest);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->data, CUDNN_DATA_FLOAT);
  EXPECT_EQ(t->compute, CUDNN_DATA_FLOAT);
  EXPECT_EQ(t->math, CUDNN_FMA_MATH);
  EXPECT_TRUE(t->fma_only);
  for (MatmulPrecision p : {MatmulPrecision::kHigh, MatmulPrecision::kMedium}) {
    t = ConvolutionTypesFor(DType::kF32, p);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->math, CUDNN_DEFAULT_MATH) << MatmulPrecisionName(p);
    EXPECT_FALSE(t->fma_only) << MatmulPrecisionName(p);
  }
}

TEST(CudnnTypes, TwoByteDtypesSumInF32OnTensorCoresAndF64StaysF64) {
  for (MatmulPrecision p :
       {MatmulPrecision::kHighest, MatmulPrecision::kHigh, MatmulPrecision::kMedium}) {
    for (auto [dtype, data] :
         {std::pair{DType::kF16, CUDNN_DATA_HALF}, std::pair{DType::kBF16, CUDNN_DATA_BFLOAT16}}) {
      std::optional<CudnnTypes> t = ConvolutionTypesFor(dtype, p);
      ASSERT_TRUE(t.has_value()) << DTypeName(dtype);
      EXPECT_EQ(t->data, data) << DTypeName(dtype);
      EXPECT_EQ(t->compute, CUDNN_DATA_FLOAT) << DTypeName(dtype);
      EXPECT_EQ(t->math, CUDNN_TENSOR_OP_MATH) << DTypeName(dtype);
      EXPECT_FALSE(t->fma_only) << DTypeName(dtype);
    }
    std::optional<CudnnTypes> t = ConvolutionTypesFor(DType::kF64, p);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->data, CUDNN_DATA_DOUBLE);
    EXPECT_EQ(t->compute, CUDNN_DATA_DOUBLE);
  }
}

TEST(CudnnTypes, IntegerConvolutionsAreNotCudnns) {
  for (DType d : {DType::kI32, DType::kI64, DType::kU8, DType::kBool}) {
    EXPECT_FALSE(ConvolutionTypesFor(d, MatmulPrecision::kHighest).has_value()) << DTypeName(d);
  }
}

// At full precision only the algorithms that sum products as they are: no FFT, no Winograd.
TEST(CudnnTypes, FullPrecisionAlgorithmsSumTheProducts) {
  using gpu::ConvPass;
  EXPECT_TRUE(SumsProducts(ConvPass::kY, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM));
  EXPECT_TRUE(SumsProducts(ConvPass::kY, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM));
  for (int a :
       {CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING,
        CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED}) {
    EXPECT_FALSE(SumsProducts(ConvPass::kY, a)) << a;
  }
  EXPECT_TRUE(SumsProducts(ConvPass::kX, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1));
  for (int a : {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
                CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD,
                CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED}) {
    EXPECT_FALSE(SumsProducts(ConvPass::kX, a)) << a;
  }
  EXPECT_TRUE(SumsProducts(ConvPass::kW, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1));
  for (int a : {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING,
                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED}) {
    EXPECT_FALSE(SumsProducts(ConvPass::kW, a)) << a;
  }
}

TEST(CudnnDims, A2dConvolutionIsFourDimensionalWithItsGeometry) {
  // x [8, 6, 10, 9], w [4, 3, 3, 2] in 2 groups, stride (2, 1), padding (1, 0), dilation (1, 2).
  const nn::Correlation g =
      Correlation({8, 6, 10, 9}, {4, 3, 3, 2}, {8, 4, 5, 7}, 2, {2, 1}, {1, 0}, {1, 2}, 2);
  std::optional<CudnnDims> d = ConvolutionDims(g);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->x, (Ints{8, 6, 10, 9}));
  EXPECT_EQ(d->y, (Ints{8, 4, 5, 7}));
  EXPECT_EQ(d->w, (Ints{4, 3, 3, 2}));
  EXPECT_EQ(d->pad, (Ints{1, 0}));
  EXPECT_EQ(d->stride, (Ints{2, 1}));
  EXPECT_EQ(d->dil, (Ints{1, 2}));
  EXPECT_EQ(d->groups, 2);
  EXPECT_EQ(d->spatial(), 2);
  EXPECT_EQ(PackedStrides(d->x), (Ints{540, 90, 9, 1}));
}

TEST(CudnnDims, A3dConvolutionIsFiveDimensionalAnUnbatchedOneHasABatchOfOne) {
  const nn::Correlation g =
      Correlation({3, 4, 5, 6}, {2, 3, 1, 2, 3}, {2, 4, 4, 4}, 3, {1, 1, 1}, {0, 0, 0}, {1, 1, 1});
  std::optional<CudnnDims> d = ConvolutionDims(g);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->x, (Ints{1, 3, 4, 5, 6}));
  EXPECT_EQ(d->y, (Ints{1, 2, 4, 4, 4}));
  EXPECT_EQ(d->w, (Ints{2, 3, 1, 2, 3}));
  EXPECT_EQ(d->spatial(), 3);
}

TEST(CudnnDims, A1dConvolutionThrough2dAndATransposedOnesRoles) {
  // conv1d runs as conv2d over [N, C, 1, L].
  std::optional<CudnnDims> d = ConvolutionDims(
      Correlation({2, 3, 1, 9}, {5, 3, 1, 3}, {2, 5, 1, 7}, 2, {1, 1}, {0, 0}, {1, 1}));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->x, (Ints{2, 3, 1, 9}));
  EXPECT_EQ(d->spatial(), 2);
  // conv_transpose2d of input [2, 4, 3, 3] with weight [4, 2, 3, 3], stride 2, output padding 1:
  // the output [2, 2, 8, 8] is the correlation's x, the input its y, the weight [yc, xc/g, ...].
  d = ConvolutionDims(
      Correlation({2, 2, 8, 8}, {4, 2, 3, 3}, {2, 4, 3, 3}, 2, {2, 2}, {0, 0}, {1, 1}));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->x, (Ints{2, 2, 8, 8}));
  EXPECT_EQ(d->y, (Ints{2, 4, 3, 3}));
  EXPECT_EQ(d->w, (Ints{4, 2, 3, 3}));
}

TEST(CudnnDims, SizesPastCudnnsIntsOrZeroAreNotTaken) {
  // 2^31 elements in x.
  EXPECT_FALSE(
      ConvolutionDims(Correlation({int64_t{1} << 16, 1, 256, 128}, {1, 1, 1, 1},
                                  {int64_t{1} << 16, 1, 256, 128}, 2, {1, 1}, {0, 0}, {1, 1}))
          .has_value());
  EXPECT_FALSE(ConvolutionDims(
                   Correlation({0, 3, 4, 4}, {2, 3, 3, 3}, {0, 2, 2, 2}, 2, {1, 1}, {0, 0}, {1, 1}))
                   .has_value());
}

// The toolkit's cuDNN where this machine has it (a build machine with the toolkit, a GPU
// machine); null where it has none.
const Cudnn* ToolkitCudnn() {
  if (dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL) == nullptr) return nullptr;
  absl::StatusOr<const Cudnn*> cudnn = LoadCudnn();
  EXPECT_TRUE(cudnn.ok()) << cudnn.status();
  return cudnn.ok() ? *cudnn : nullptr;
}

// Every symbol binds and the version is 9 or later. No GPU needed.
TEST(CudnnLibrary, LoadsWithEverySymbolTheConvolutionsBind) {
  const Cudnn* cudnn = ToolkitCudnn();
  if (cudnn == nullptr) GTEST_SKIP() << "no libcudnn.so.9 on this machine";
  EXPECT_GE(cudnn->version, 90000u);
}

// cuDNN takes the descriptors of every kind of correlation the convolutions make, and computes
// the same output sizes from x as the correlation has (descriptors need no GPU): a forward
// convolution with groups, stride, padding and dilation; 3-d; an input gradient whose last rows
// no window reaches; a transposed convolution with output padding (its output in the x role).
TEST(CudnnLibrary, TakesTheDescriptorsOfEveryCorrelationKind) {
  const Cudnn* cudnn = ToolkitCudnn();
  if (cudnn == nullptr) GTEST_SKIP() << "no libcudnn.so.9 on this machine";
  const std::vector<nn::Correlation> cases = {
      Correlation({8, 6, 10, 9}, {4, 3, 3, 2}, {8, 4, 5, 7}, 2, {2, 1}, {1, 0}, {1, 2}, 2),
      Correlation({3, 4, 5, 6}, {2, 3, 1, 2, 3}, {2, 4, 4, 4}, 3, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}),
      Correlation({2, 3, 10, 10}, {5, 3, 3, 3}, {2, 5, 4, 4}, 2, {2, 2}, {0, 0}, {1, 1}),
      Correlation({2, 2, 8, 8}, {4, 2, 3, 3}, {2, 4, 3, 3}, 2, {2, 2}, {0, 0}, {1, 1}),
      Correlation({2, 3, 1, 9}, {5, 3, 1, 3}, {2, 5, 1, 7}, 2, {1, 1}, {0, 0}, {1, 1})};
  for (DType dtype : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}) {
    const CudnnTypes types = *ConvolutionTypesFor(dtype, MatmulPrecision::kHighest);
    for (const nn::Correlation& g : cases) {
      const std::optional<CudnnDims> dims = ConvolutionDims(g);
      ASSERT_TRUE(dims.has_value());
      auto made = ConvolutionDescriptors::Make(*cudnn, types, *dims);
      EXPECT_TRUE(made.ok()) << DTypeName(dtype) << ": " << made.status();
    }
  }
  // Sizes cuDNN would compute otherwise are not given to it.
  CudnnDims wrong = *ConvolutionDims(cases[0]);
  wrong.y[2] += 1;
  auto made = ConvolutionDescriptors::Make(*cudnn, *ConvolutionTypesFor(DType::kF32, {}), wrong);
  EXPECT_FALSE(made.ok());
}

}  // namespace
}  // namespace tensord::cuda
