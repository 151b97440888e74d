// conv2d, max/avg pooling, layer_norm, embedding and dropout against references written from
// PyTorch's definitions, on f32 (oneDNN) and f64 (loops), plus their error cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

using Ints = std::vector<int64_t>;
double Tol(DType d) { return d == DType::kF32 ? 2e-4 : 1e-10; }

struct ConvCase {
  Shape x, w;
  Ints stride, padding, dilation;
  int64_t groups;
  bool bias;
};

// conv2d from the definition: y[n,o,i,j] = b[o] + sum_{c,p,q} x_pad[n, g*C/g + c,
// i*s + p*d, j*s + q*d] * w[o, c, p, q].
std::vector<double> RefConv(const Tensor& x, const Tensor& w, const Tensor* b, const ConvCase& k,
                            Shape* out) {
  const bool batched = x.rank() == 4;
  const int64_t N = batched ? x.dim(0) : 1, C = x.dim(x.rank() - 3), H = x.dim(x.rank() - 2),
                W = x.dim(x.rank() - 1);
  const int64_t O = w.dim(0), CG = w.dim(1), KH = w.dim(2), KW = w.dim(3);
  const int64_t OH = (H + 2 * k.padding[0] - k.dilation[0] * (KH - 1) - 1) / k.stride[0] + 1;
  const int64_t OW = (W + 2 * k.padding[1] - k.dilation[1] * (KW - 1) - 1) / k.stride[1] + 1;
  const std::vector<double> xv = x.ToDoubles(), wv = w.ToDoubles();
  std::vector<double> y;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / (O / k.groups);
      for (int64_t i = 0; i < OH; ++i) {
        for (int64_t j = 0; j < OW; ++j) {
          double acc = b ? b->ElementAsDouble(o) : 0.0;
          for (int64_t c = 0; c < CG; ++c) {
            for (int64_t p = 0; p < KH; ++p) {
              for (int64_t q = 0; q < KW; ++q) {
                const int64_t h = i * k.stride[0] - k.padding[0] + p * k.dilation[0];
                const int64_t v = j * k.stride[1] - k.padding[1] + q * k.dilation[1];
                if (h < 0 || h >= H || v < 0 || v >= W) continue;
                acc += xv[((n * C + g * CG + c) * H + h) * W + v] *
                       wv[((o * CG + c) * KH + p) * KW + q];
              }
            }
          }
          y.push_back(acc);
        }
      }
    }
  }
  *out = batched ? Shape{N, O, OH, OW} : Shape{O, OH, OW};
  return y;
}

AttrMap ConvAttrs(const ConvCase& k) {
  return {
      {"stride", k.stride}, {"padding", k.padding}, {"dilation", k.dilation}, {"groups", k.groups}};
}

class NnTest : public ::testing::TestWithParam<DType> {};

TEST_P(NnTest, Conv2d) {
  const DType dt = GetParam();
  const std::vector<ConvCase> cases = {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true},
      {{2, 3, 7, 6}, {4, 3, 3, 2}, {2, 1}, {1, 2}, {1, 1}, 1, false},
      {{1, 2, 9, 9}, {3, 2, 3, 3}, {1, 2}, {2, 1}, {2, 3}, 1, true},
      {{2, 4, 6, 5}, {6, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, true},
      {{4, 5, 5}, {4, 1, 2, 2}, {2, 2}, {1, 0}, {1, 1}, 4, true},
      {{3, 6, 5}, {2, 3, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, false},
      {{0, 3, 5, 5}, {2, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true}};
  uint32_t seed = 1;
  for (const ConvCase& k : cases) {
    Tensor x = Random(dt, k.x, seed++), w = Random(dt, k.w, seed++), b = Random(dt, {k.w[0]}, 9);
    std::vector<Tensor> in = {x, w};
    if (k.bias) in.push_back(b);
    Shape want;
    std::vector<double> ref = RefConv(x, w, k.bias ? &b : nullptr, k, &want);
    Tensor y = Run1("conv2d", in, ConvAttrs(k));
    ASSERT_TRUE(y.defined());
    EXPECT_EQ(y.shape(), want) << ShapeToString(k.x);
    EXPECT_TRUE(AllClose(y, ref, Tol(dt), Tol(dt))) << ShapeToString(k.x);
  }
}

TEST_P(NnTest, Conv2dSingleIntAttributes) {
  const DType dt = GetParam();
  Tensor x = Random(dt, {1, 2, 8, 8}, 1), w = Random(dt, {3, 2, 3, 3}, 2);
  Tensor y = Run1("conv2d", {x, w}, {{"stride", int64_t{2}}, {"padding", int64_t{1}}});
  ConvCase k{{1, 2, 8, 8}, {3, 2, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, false};
  Shape want;
  EXPECT_TRUE(AllClose(y, RefConv(x, w, nullptr, k, &want), Tol(dt), Tol(dt)));
  EXPECT_EQ(y.shape(), want);
}

struct PoolCase {
  Shape x;
  Ints kernel, stride, padding, dilation;
  bool ceil_mode;
};

int64_t PoolOut(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// Pooling from the definition. Max: maximum over in-bounds taps, NaN wins. Avg: sum over
// in-bounds taps divided by the taps inside the padded input (count_include_pad) or inside the
// input, or by divisor_override.
std::vector<double> RefPool(const Tensor& x, const PoolCase& k, bool max, bool include_pad,
                            int64_t divisor_override, Shape* out) {
  const bool batched = x.rank() == 4;
  const int64_t P = x.numel() / (x.dim(x.rank() - 2) * x.dim(x.rank() - 1));
  const int64_t H = x.dim(x.rank() - 2), W = x.dim(x.rank() - 1);
  const Ints d = max ? k.dilation : Ints{1, 1};
  const int64_t OH = PoolOut(H, k.kernel[0], k.stride[0], k.padding[0], d[0], k.ceil_mode);
  const int64_t OW = PoolOut(W, k.kernel[1], k.stride[1], k.padding[1], d[1], k.ceil_mode);
  const std::vector<double> xv = x.ToDoubles();
  std::vector<double> y;
  for (int64_t pl = 0; pl < P; ++pl) {
    for (int64_t i = 0; i < OH; ++i) {
      for (int64_t j = 0; j < OW; ++j) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t padded = 0, inside = 0;
        for (int64_t p = 0; p < k.kernel[0]; ++p) {
          for (int64_t q = 0; q < k.kernel[1]; ++q) {
            const int64_t h = i * k.stride[0] - k.padding[0] + p * d[0];
            const int64_t v = j * k.stride[1] - k.padding[1] + q * d[1];
            if (h < H + k.padding[0] && v < W + k.padding[1]) ++padded;
            if (h < 0 || h >= H || v < 0 || v >= W) continue;
            const double e = xv[(pl * H + h) * W + v];
            ++inside;
            sum += e;
            if (e > best || std::isnan(e)) best = e;
          }
        }
        const int64_t div = divisor_override ? divisor_override : include_pad ? padded : inside;
        y.push_back(max ? best : sum / div);
      }
    }
  }
  *out = x.shape();
  (*out)[out->size() - 2] = OH;
  (*out)[out->size() - 1] = OW;
  (void)batched;
  return y;
}

std::vector<PoolCase> PoolCases() {
  return {{{2, 3, 7, 6}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
          {{2, 3, 7, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
          {{2, 3, 7, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},
          {{1, 2, 8, 9}, {3, 2}, {2, 3}, {1, 0}, {2, 1}, true},
          {{3, 5, 5}, {2, 2}, {2, 2}, {0, 1}, {1, 1}, true},
          {{1, 1, 6, 6}, {4, 4}, {3, 3}, {2, 2}, {1, 1}, true},
          {{2, 2, 5, 5}, {5, 5}, {1, 1}, {0, 0}, {1, 1}, false}};
}

AttrMap PoolAttrs(const PoolCase& k, bool max) {
  AttrMap a = {{"kernel_size", k.kernel},
               {"stride", k.stride},
               {"padding", k.padding},
               {"ceil_mode", k.ceil_mode}};
  if (max) a["dilation"] = k.dilation;
  return a;
}

TEST_P(NnTest, MaxPool2d) {
  const DType dt = GetParam();
  uint32_t seed = 20;
  for (const PoolCase& k : PoolCases()) {
    Tensor x = Random(dt, k.x, seed++);
    Shape want;
    std::vector<double> ref = RefPool(x, k, true, false, 0, &want);
    Tensor y = Run1("max_pool2d", {x}, PoolAttrs(k, true));
    EXPECT_EQ(y.shape(), want) << ShapeToString(k.x);
    EXPECT_TRUE(AllClose(y, ref, Tol(dt), Tol(dt))) << ShapeToString(k.x);
  }
}

TEST_P(NnTest, AvgPool2d) {
  const DType dt = GetParam();
  uint32_t seed = 40;
  for (const PoolCase& k : PoolCases()) {
    Tensor x = Random(dt, k.x, seed++);
    for (bool include_pad : {true, false}) {
      for (int64_t divisor : {int64_t{0}, int64_t{3}}) {
        AttrMap a = PoolAttrs(k, false);
        a["count_include_pad"] = include_pad;
        if (divisor) a["divisor_override"] = divisor;
        Shape want;
        std::vector<double> ref = RefPool(x, k, false, include_pad, divisor, &want);
        Tensor y = Run1("avg_pool2d", {x}, a);
        EXPECT_EQ(y.shape(), want);
        EXPECT_TRUE(AllClose(y, ref, Tol(dt), Tol(dt)))
            << ShapeToString(k.x) << " include_pad=" << include_pad << " divisor=" << divisor
            << " ceil=" << k.ceil_mode;
      }
    }
  }
}

TEST_P(NnTest, PoolStrideDefaultsToKernel) {
  const DType dt = GetParam();
  Tensor x = Random(dt, {1, 1, 6, 6}, 3);
  Tensor y = Run1("max_pool2d", {x}, {{"kernel_size", Ints{3}}});
  PoolCase k{{1, 1, 6, 6}, {3, 3}, {3, 3}, {0, 0}, {1, 1}, false};
  Shape want;
  EXPECT_TRUE(AllClose(y, RefPool(x, k, true, false, 0, &want), Tol(dt), Tol(dt)));
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
}

TEST(Nn, MaxPoolPropagatesNan) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    Tensor x = Values(dt, {1, 1, 2, 4}, {1, NAN, 3, 4, 5, 6, 7, 8});
    Tensor y = Run1("max_pool2d", {x}, {{"kernel_size", Ints{2}}});
    ASSERT_TRUE(y.defined());
    EXPECT_TRUE(std::isnan(y.ElementAsDouble(0))) << DTypeName(dt);
    EXPECT_EQ(y.ElementAsDouble(1), 8);
  }
}

// layer_norm from the definition: (x - mean) / sqrt(var + eps) * w + b over the trailing dims.
std::vector<double> RefLayerNorm(const Tensor& x, int64_t cols, const Tensor* w, const Tensor* b,
                                 double eps) {
  const std::vector<double> xv = x.ToDoubles();
  std::vector<double> y(xv.size());
  for (size_t r = 0; r * cols < xv.size(); ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j) mean += xv[r * cols + j] / cols;
    for (int64_t j = 0; j < cols; ++j) {
      var += (xv[r * cols + j] - mean) * (xv[r * cols + j] - mean) / cols;
    }
    for (int64_t j = 0; j < cols; ++j) {
      double v = (xv[r * cols + j] - mean) / std::sqrt(var + eps);
      if (w) v = v * w->ElementAsDouble(j);
      if (b) v = v + b->ElementAsDouble(j);
      y[r * cols + j] = v;
    }
  }
  return y;
}

TEST_P(NnTest, LayerNorm) {
  const DType dt = GetParam();
  Tensor x = Random(dt, {3, 4, 5}, 1, -2, 3);
  for (const Shape& norm : {Shape{5}, Shape{4, 5}}) {
    const int64_t cols = NumElements(norm);
    Tensor w = Random(dt, norm, 2), b = Random(dt, norm, 3);
    AttrMap a = {{"normalized_shape", norm}};
    EXPECT_TRUE(AllClose(Run1("layer_norm", {x}, a), RefLayerNorm(x, cols, nullptr, nullptr, 1e-5),
                         Tol(dt), Tol(dt)));
    EXPECT_TRUE(AllClose(Run1("layer_norm", {x, w}, a), RefLayerNorm(x, cols, &w, nullptr, 1e-5),
                         Tol(dt), Tol(dt)));
    a["eps"] = 0.1;
    EXPECT_TRUE(AllClose(Run1("layer_norm", {x, w, b}, a), RefLayerNorm(x, cols, &w, &b, 0.1),
                         Tol(dt), Tol(dt)));
  }
  Tensor empty = Run1("layer_norm", {Random(dt, {0, 5}, 4)}, {{"normalized_shape", Ints{5}}});
  EXPECT_EQ(empty.shape(), (Shape{0, 5}));
}

TEST_P(NnTest, Embedding) {
  const DType dt = GetParam();
  Tensor w = Random(dt, {6, 3}, 1);
  for (DType it : {DType::kI32, DType::kI64}) {
    Tensor idx = Values(it, {2, 3}, {0, 5, 2, 2, 1, 0});
    Tensor y = Run1("embedding", {idx, w}, {{"padding_idx", int64_t{2}}});
    ASSERT_TRUE(y.defined());
    EXPECT_EQ(y.shape(), (Shape{2, 3, 3}));
    EXPECT_EQ(y.dtype(), dt);
    std::vector<double> ref;
    for (double i : idx.ToDoubles()) {
      for (int64_t j = 0; j < 3; ++j)
        ref.push_back(w.ElementAsDouble(static_cast<int64_t>(i) * 3 + j));
    }
    EXPECT_TRUE(AllClose(y, ref, 0, 0));
  }
  auto bad = RunOp("embedding", {Values(DType::kI64, {2}, {1, 6}), w});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(GetReason(bad.status()), Reason::kIndexOutOfRange);
  EXPECT_NE(bad.status().message().find("6"), absl::string_view::npos);
  EXPECT_EQ(GetReason(RunOp("embedding", {Values(DType::kI32, {1}, {-1}), w}).status()),
            Reason::kIndexOutOfRange);
  EXPECT_EQ(GetReason(RunOp("embedding", {Values(DType::kI32, {1}, {1}), w},
                            {{"padding_idx", int64_t{6}}})
                          .status()),
            Reason::kBadAttribute);
}

INSTANTIATE_TEST_SUITE_P(Float, NnTest, ::testing::Values(DType::kF32, DType::kF64),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST(Nn, EveryOpHasACpuKernel) {
  for (const char* op : {"matmul", "mm", "bmm", "linear", "conv2d", "max_pool2d", "avg_pool2d",
                         "layer_norm", "embedding", "dropout"}) {
    auto def = TestDispatcher().registry().Find(op);
    ASSERT_TRUE(def.ok()) << op;
    const std::vector<std::string> backends = TestDispatcher().BackendsFor(**def);
    EXPECT_EQ(backends, std::vector<std::string>{"cpu"}) << op;
  }
}

TEST(Nn, EmbeddingDtypes) {
  Tensor w = Random(DType::kF32, {4, 2}, 1);
  // Indices are the primary operand: a float index tensor is refused, as is an integer weight.
  EXPECT_EQ(GetReason(RunOp("embedding", {Random(DType::kF32, {2}, 2), w}).status()),
            Reason::kDtypeMismatch);
  EXPECT_EQ(GetReason(RunOp("embedding", {Values(DType::kI64, {1}, {0}),
                                          Values(DType::kI64, {2, 2}, {1, 2, 3, 4})})
                          .status()),
            Reason::kDtypeMismatch);
  EXPECT_EQ(
      GetReason(RunOp("embedding", {Values(DType::kI64, {1}, {0}), Random(DType::kF32, {4}, 3)})
                    .status()),
      Reason::kShapeMismatch);
}

TEST(Nn, DropoutStatisticsAndScale) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    const int64_t n = 200000;
    Tensor x = Random(dt, {n}, 1, 1, 2);  // no zeros, so a zero output means dropped
    for (double p : {0.1, 0.5, 0.8}) {
      Tensor y = Run1("dropout", {x}, {{"p", p}, {"seed", int64_t{7}}});
      ASSERT_TRUE(y.defined());
      int64_t kept = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double v = y.ElementAsDouble(i);
        if (v == 0) continue;
        ++kept;
        ASSERT_NEAR(v, x.ElementAsDouble(i) / (1 - p), 1e-5 * std::fabs(v));
      }
      // Binomial(n, 1 - p): five standard deviations.
      const double sd = std::sqrt(n * p * (1 - p));
      EXPECT_NEAR(kept, n * (1 - p), 5 * sd) << "p=" << p;
    }
  }
}

TEST(Nn, DropoutSeedDeterminism) {
  Tensor x = Random(DType::kF32, {1000}, 2, 1, 2);
  AttrMap seeded = {{"p", 0.5}, {"seed", int64_t{42}}};
  Tensor a = Run1("dropout", {x}, seeded), b = Run1("dropout", {x}, seeded);
  EXPECT_TRUE(AllClose(a, b, 0, 0));
  Tensor c = Run1("dropout", {x}, {{"p", 0.5}, {"seed", int64_t{43}}});
  EXPECT_FALSE(AllClose(a, c, 0, 0));
  // Without a seed every call draws a new mask.
  Tensor d = Run1("dropout", {x}, {{"p", 0.5}}), e = Run1("dropout", {x}, {{"p", 0.5}});
  EXPECT_FALSE(AllClose(d, e, 0, 0));
}

TEST(Nn, DropoutEdgeCases) {
  Tensor x = Random(DType::kF64, {50}, 3);
  EXPECT_TRUE(AllClose(Run1("dropout", {x}, {{"p", 0.5}, {"training", false}}), x, 0, 0));
  EXPECT_TRUE(AllClose(Run1("dropout", {x}, {{"p", 0.0}}), x, 0, 0));
  EXPECT_TRUE(AllClose(Run1("dropout", {x}, {{"p", 1.0}}), std::vector<double>(50, 0.0), 0, 0));
  EXPECT_EQ(Run1("dropout", {Random(DType::kF32, {0, 3}, 1)}).shape(), (Shape{0, 3}));
  for (double p : {1.5, -0.1}) {
    auto r = RunOp("dropout", {x}, {{"p", p}});
    EXPECT_EQ(GetReason(r.status()), Reason::kBadAttribute) << p;
  }
}

TEST(Nn, ConvErrors) {
  Tensor x = Random(DType::kF32, {1, 3, 5, 5}, 1);
  // Channel mismatch: weight expects 4 input channels.
  auto r = RunOp("conv2d", {x, Random(DType::kF32, {2, 4, 3, 3}, 2)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(GetReason(r.status()), Reason::kShapeMismatch);
  EXPECT_NE(r.status().message().find("[1, 3, 5, 5]"), absl::string_view::npos) << r.status();
  Tensor w = Random(DType::kF32, {2, 3, 3, 3}, 3);
  EXPECT_EQ(GetReason(RunOp("conv2d", {x, Random(DType::kF32, {2, 3, 3}, 4)}).status()),
            Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("conv2d", {x, Random(DType::kF32, {2, 3, 6, 6}, 5)}).status()),
            Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("conv2d", {x, w, Random(DType::kF32, {3}, 6)}).status()),
            Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("conv2d", {x, w}, {{"groups", int64_t{2}}}).status()),
            Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("conv2d", {x, w}, {{"stride", Ints{0}}}).status()),
            Reason::kBadAttribute);
  EXPECT_EQ(GetReason(RunOp("conv2d", {x, w}, {{"padding", Ints{1, 1, 1}}}).status()),
            Reason::kBadAttribute);
  EXPECT_EQ(GetReason(RunOp("conv2d", {x, Random(DType::kF64, {2, 3, 3, 3}, 7)}).status()),
            Reason::kDtypeMismatch);
  EXPECT_EQ(GetReason(RunOp("conv2d", {Random(DType::kF32, {5, 5}, 8), w}).status()),
            Reason::kShapeMismatch);
}

TEST(Nn, PoolErrors) {
  Tensor x = Random(DType::kF32, {1, 1, 4, 4}, 1);
  EXPECT_EQ(GetReason(RunOp("max_pool2d", {x}, {{"kernel_size", Ints{0}}}).status()),
            Reason::kBadAttribute);
  EXPECT_EQ(GetReason(RunOp("max_pool2d", {x}).status()), Reason::kBadAttribute);
  EXPECT_EQ(GetReason(RunOp("max_pool2d", {x}, {{"kernel_size", Ints{5}}}).status()),
            Reason::kShapeMismatch);
  EXPECT_EQ(
      GetReason(
          RunOp("avg_pool2d", {x}, {{"kernel_size", Ints{2}}, {"padding", Ints{2}}}).status()),
      Reason::kBadAttribute);
  EXPECT_EQ(GetReason(RunOp("avg_pool2d", {x},
                            {{"kernel_size", Ints{2}}, {"divisor_override", int64_t{0}}})
                          .status()),
            Reason::kBadAttribute);
  EXPECT_EQ(
      GetReason(RunOp("avg_pool2d", {Random(DType::kF32, {4, 4}, 2)}, {{"kernel_size", Ints{2}}})
                    .status()),
      Reason::kShapeMismatch);
}

TEST(Nn, LayerNormErrors) {
  Tensor x = Random(DType::kF32, {2, 3}, 1);
  EXPECT_EQ(GetReason(RunOp("layer_norm", {x}, {{"normalized_shape", Ints{2}}}).status()),
            Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("layer_norm", {x, Random(DType::kF32, {2}, 2)},
                            {{"normalized_shape", Ints{3}}})
                          .status()),
            Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("layer_norm", {x}).status()), Reason::kBadAttribute);
}

}  // namespace
}  // namespace tensord
