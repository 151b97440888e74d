// batch_norm, group_norm, interpolate and scaled_dot_product_attention against references:
// batch/group statistics and attention written from PyTorch's definitions, interpolate against
// values PyTorch 1.13 computed (F.interpolate on the inputs Pattern() builds). f32 runs the
// oneDNN kernels where they apply and must agree with the f64 loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "server/backends/cpu/kernel_table.h"
#include "server/core/status.h"
#include "server/ops/registry.h"
#include "tests/support/onednn_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

using Ints = std::vector<int64_t>;
constexpr DType kF32 = DType::kF32;
constexpr DType kF64 = DType::kF64;
double Tol(DType d) { return d == kF32 ? 2e-5 : 1e-12; }

class NormResampleAttentionTest : public ::testing::TestWithParam<DType> {};

// Per-channel mean and biased variance of [N, C, *].
void Moments(const Tensor& x, std::vector<double>* mean, std::vector<double>* var) {
  const int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / std::max<int64_t>(1, n * c);
  const std::vector<double> v = x.ToDoubles();
  mean->assign(c, 0.0);
  var->assign(c, 0.0);
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = 0, q = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < inner; ++j) s += v[(i * c + ch) * inner + j];
    }
    const double mu = s / (n * inner);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < inner; ++j) {
        q += (v[(i * c + ch) * inner + j] - mu) * (v[(i * c + ch) * inner + j] - mu);
      }
    }
    (*mean)[ch] = mu;
    (*var)[ch] = q / (n * inner);
  }
}

std::vector<double> RefNormalize(const Tensor& x, const std::vector<double>& mean,
                                 const std::vector<double>& var, const Tensor* w, const Tensor* b,
                                 double eps) {
  const int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / std::max<int64_t>(1, n * c);
  std::vector<double> y = x.ToDoubles();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t j = 0; j < inner; ++j) {
        double& v = y[(i * c + ch) * inner + j];
        v = (v - mean[ch]) / std::sqrt(var[ch] + eps);
        if (w) v *= w->ElementAsDouble(ch);
        if (b) v += b->ElementAsDouble(ch);
      }
    }
  }
  return y;
}

TEST_P(NormResampleAttentionTest, BatchNormTraining) {
  const DType dt = GetParam();
  for (const Shape& shape :
       {Shape{4, 3}, Shape{2, 3, 5}, Shape{3, 2, 3, 4}, Shape{2, 1, 2, 1, 3}}) {
    const int64_t c = shape[1];
    Tensor x = Random(dt, shape, 1, -2, 3);
    Tensor w = Random(dt, {c}, 2, 0.5, 1.5), b = Random(dt, {c}, 3);
    Tensor rm = Random(dt, {c}, 4), rv = Random(dt, {c}, 5, 0.5, 2);
    const std::vector<double> rm0 = rm.ToDoubles(), rv0 = rv.ToDoubles();
    std::vector<double> mean, var;
    Moments(x, &mean, &var);
    const double momentum = 0.3, eps = 1e-3;
    Tensor y = Run1("batch_norm", {x, rm, rv, w, b},
                    {{"training", true}, {"momentum", momentum}, {"eps", eps}});
    EXPECT_TRUE(AllClose(y, RefNormalize(x, mean, var, &w, &b, eps), Tol(dt), Tol(dt)))
        << ShapeToString(shape);
    // The running statistics were updated in place, the variance unbiased.
    const double count = static_cast<double>(x.numel() / c);
    std::vector<double> want_m(c), want_v(c);
    for (int64_t ch = 0; ch < c; ++ch) {
      want_m[ch] = (1 - momentum) * rm0[ch] + momentum * mean[ch];
      want_v[ch] = (1 - momentum) * rv0[ch] + momentum * var[ch] * count / (count - 1);
    }
    EXPECT_TRUE(AllClose(rm, want_m, Tol(dt), Tol(dt))) << ShapeToString(shape);
    EXPECT_TRUE(AllClose(rv, want_v, Tol(dt), Tol(dt))) << ShapeToString(shape);
  }
}

// Batch statistics of f32 data far from zero mean: accumulated in f32 they would be off by
// more than PyTorch's (which stays within 1e-4 here).
TEST(NormResampleAttentionAccuracy, BatchNormF32FarFromZeroMean) {
  Tensor x64 = Random(kF64, {32, 4, 16, 16}, 70, 999, 1001);
  Tensor x32 = Run1("to_dtype", {x64}, {{"dtype", std::string("f32")}});
  std::vector<double> mean, var;
  Moments(x32, &mean, &var);
  Tensor y = Run1("batch_norm", {x32}, {{"training", true}});
  EXPECT_TRUE(AllClose(y, RefNormalize(x32, mean, var, nullptr, nullptr, 1e-5), 0, 1e-4));
}

TEST_P(NormResampleAttentionTest, BatchNormOptionalInputs) {
  const DType dt = GetParam();
  Tensor x = Random(dt, {3, 2, 4}, 6, -1, 2);
  std::vector<double> mean, var;
  Moments(x, &mean, &var);
  // Training without running statistics or affine parameters.
  EXPECT_TRUE(AllClose(Run1("batch_norm", {x}, {{"training", true}}),
                       RefNormalize(x, mean, var, nullptr, nullptr, 1e-5), Tol(dt), Tol(dt)));
  // weight without running statistics: [0]-shaped tensors stand for absent ones.
  Tensor none = Values(dt, {0}, {});
  Tensor w = Random(dt, {2}, 7);
  EXPECT_TRUE(AllClose(Run1("batch_norm", {x, none, none, w}, {{"training", true}}),
                       RefNormalize(x, mean, var, &w, nullptr, 1e-5), Tol(dt), Tol(dt)));
  // Only a running mean: it alone is updated.
  Tensor rm = Values(dt, {2}, {1.0, -1.0});
  Run1("batch_norm", {x, rm, none}, {{"training", true}, {"momentum", 1.0}});
  EXPECT_TRUE(AllClose(rm, mean, Tol(dt), Tol(dt)));
}

TEST_P(NormResampleAttentionTest, BatchNormEval) {
  const DType dt = GetParam();
  Tensor x = Random(dt, {2, 3, 2, 2}, 8);
  Tensor rm = Random(dt, {3}, 9), rv = Random(dt, {3}, 10, 0.5, 2);
  Tensor w = Random(dt, {3}, 11), b = Random(dt, {3}, 12);
  const std::vector<double> rm0 = rm.ToDoubles(), rv0 = rv.ToDoubles();
  Tensor y = Run1("batch_norm", {x, rm, rv, w, b}, {{"training", false}});
  EXPECT_TRUE(AllClose(y, RefNormalize(x, rm0, rv0, &w, &b, 1e-5), Tol(dt), Tol(dt)));
  // Evaluation leaves the running statistics alone.
  EXPECT_TRUE(AllClose(rm, rm0, 0, 0));
  EXPECT_TRUE(AllClose(rv, rv0, 0, 0));
}

TEST_P(NormResampleAttentionTest, BatchNormEmptyBatchKeepsRunningStats) {
  const DType dt = GetParam();
  Tensor rm = Values(dt, {2}, {0.5, 0.25});
  Tensor y = Run1("batch_norm", {Values(dt, {0, 2, 3}, {}), rm, Values(dt, {2}, {1, 1})},
                  {{"training", true}});
  EXPECT_EQ(y.shape(), (Shape{0, 2, 3}));
  EXPECT_TRUE(AllClose(rm, {0.5, 0.25}, 0, 0));
}

TEST_P(NormResampleAttentionTest, GroupNorm) {
  const DType dt = GetParam();
  struct Case {
    Shape x;
    int64_t groups;
    bool affine;
  };
  for (const Case& k :
       {Case{{2, 6, 5}, 3, true}, Case{{3, 4}, 2, true}, Case{{2, 6, 3, 3}, 1, false},
        Case{{1, 4, 2, 3}, 4, true}, Case{{0, 4, 3}, 2, true}}) {
    Tensor x = Random(dt, k.x, 13, -1, 2);
    const int64_t n = k.x[0], c = k.x[1], cg = c / k.groups;
    const int64_t inner = n * c ? x.numel() / (n * c) : 0;
    Tensor w = Random(dt, {c}, 14), b = Random(dt, {c}, 15);
    const std::vector<double> v = x.ToDoubles();
    std::vector<double> want(v.size());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t g = 0; g < k.groups; ++g) {
        const int64_t start = (i * c + g * cg) * inner, len = cg * inner;
        double s = 0, q = 0;
        for (int64_t j = 0; j < len; ++j) s += v[start + j];
        const double mu = s / len;
        for (int64_t j = 0; j < len; ++j) q += (v[start + j] - mu) * (v[start + j] - mu);
        const double rstd = 1 / std::sqrt(q / len + 1e-5);
        for (int64_t j = 0; j < len; ++j) {
          const int64_t ch = g * cg + j / inner;
          want[start + j] = (v[start + j] - mu) * rstd;
          if (k.affine)
            want[start + j] = want[start + j] * w.ElementAsDouble(ch) + b.ElementAsDouble(ch);
        }
      }
    }
    std::vector<Tensor> in = {x};
    if (k.affine) in = {x, w, b};
    Tensor y = Run1("group_norm", in, {{"num_groups", k.groups}});
    EXPECT_EQ(y.shape(), k.x);
    EXPECT_TRUE(AllClose(y, want, 1e-4, Tol(dt) * 10)) << ShapeToString(k.x);
  }
}

// ((7 * i) mod 11) / 4 - 1: the inputs the interpolate references were computed on.
Tensor Pattern(DType dt, const Shape& shape) {
  std::vector<double> v(NumElements(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7) % 11) / 4.0 - 1.0;
  return Values(dt, shape, v);
}

struct InterpCase {
  Shape x;
  AttrMap attrs;
  Shape out;
  std::vector<double> want;
};

TEST_P(NormResampleAttentionTest, InterpolateMatchesPyTorch) {
  const DType dt = GetParam();
  const std::vector<InterpCase> cases = {
      // clang-format off
      {{1, 1, 3, 5},
       {{"size", Ints{4, 7}}, {"mode", std::string("nearest")}},
       {1, 1, 4, 7},
       {-1, -1, 0.75, -0.25, -0.25, 1.5, 0.5, -1,
        -1, 0.75, -0.25, -0.25, 1.5, 0.5, -0.5, -0.5,
        1.25, 0.25, 0.25, -0.75, 1, 0, 0, -1,
        0.75, 0.75, -0.25, 1.5}},
      {{1, 1, 3, 5},
       {{"scale_factor", std::vector<double>{1.7}}, {"mode", std::string("nearest")}},
       {1, 1, 5, 8},
       {-1, -1, 0.75, 0.75, -0.25, -0.25, 1.5, 0.5,
        -1, -1, 0.75, 0.75, -0.25, -0.25, 1.5, 0.5,
        -0.5, -0.5, 1.25, 1.25, 0.25, 0.25, -0.75, 1,
        -0.5, -0.5, 1.25, 1.25, 0.25, 0.25, -0.75, 1,
        0, 0, -1, -1, 0.75, 0.75, -0.25, 1.5}},
      {{1, 1, 4, 6},
       {{"scale_factor", std::vector<double>{0.5}}, {"mode", std::string("nearest")}},
       {1, 1, 2, 3},
       {-1, -0.25, 0.5, 0.75, 1.5, -0.5}},
      {{1, 1, 3, 5},
       {{"size", Ints{5, 8}}, {"mode", std::string("bilinear")}, {"align_corners", false}},
       {1, 1, 5, 8},
       {-1, -0.234375, 0.6875, 0.0625, 0.296875, 1.390625, 0.9375, 0.5,
        -0.8, -0.0343749999999999, 0.8875, 0.2625, 0.153125, 0.559375, 0.65625, 0.7,
        -0.5, 0.265625, 1.1875, 0.5625, -0.0625, -0.6875, 0.234375, 1,
        -0.2, -0.15625, -0.0593749999999997, 0.346875, 0.2375, -0.3875, 0.534375, 1.3,
        0, -0.4375, -0.890625, 0.203125, 0.4375, -0.1875, 0.734375, 1.5}},
      {{1, 1, 3, 5},
       {{"size", Ints{4, 7}}, {"mode", std::string("bilinear")}, {"align_corners", true}},
       {1, 1, 4, 7},
       {-1, 0.166666666666667, 0.416666666666667, -0.25, 0.916666666666666, 1.16666666666667, 0.5, -0.666666666666667,
        0.5, 0.75, 0.0833333333333333, 0.0277777777777779, 0.277777777777778, 0.833333333333333, -0.333333333333333, 0.222222222222222,
        0.472222222222222, 0.416666666666667, -0.25, -5.55111512312578e-16, 1.16666666666667, 0, -0.666666666666667, -0.416666666666667,
        0.75, 0.0833333333333335, 0.333333333333333, 1.5}},
      {{1, 1, 3, 4},
       {{"scale_factor", std::vector<double>{2.5}}, {"mode", std::string("bilinear")}, {"align_corners", false}},
       {1, 1, 7, 10},
       {-1, -0.825, -0.125, 0.575, 0.45, 0.0499999999999998, -0.0749999999999998, 0.625,
        1.325, 1.5, -0.85, -0.7025, -0.1125, 0.4775, 0.4075, 0.1175,
        0.0475000000000002, 0.6375, 1.2275, 1.375, -0.25, -0.2125, -0.0625, 0.0875,
        0.2375, 0.3875, 0.5375, 0.6875, 0.8375, 0.875, 0.35, 0.2775,
        -0.0125, -0.3025, 0.0675, 0.6575, 1.0275, 0.7375, 0.4475, 0.375,
        0.125, 0.1075, 0.0375, -0.0324999999999999, 0.2275, 0.5975, 0.775, 0.375,
        -0.0250000000000004, -0.125, -0.375, -0.2825, 0.0875, 0.4575, 0.4975, 0.4275,
        0.275, -0.125, -0.525000000000001, -0.625, -0.75, -0.575, 0.125, 0.825,
        0.7, 0.3, -0.1, -0.5, -0.9, -1}},
      {{2, 2, 5},
       {{"size", Ints{9}}, {"mode", std::string("linear")}, {"align_corners", false}},
       {2, 2, 9},
       {-1, -0.416666666666667, 0.555555555555556, 0.305555555555555, -0.25, 0.722222222222223, 1.38888888888889, 0.833333333333333,
        0.5, -0.5, 0.0833333333333334, 1.05555555555556, 0.805555555555555, 0.25, -0.305555555555556, -0.555555555555555,
        0.416666666666667, 1, 0, -0.333333333333333, -0.888888888888889, -0.222222222222222, 0.75, 0.194444444444444,
        -0.0555555555555555, 0.916666666666667, 1.5, 0.5, 0.166666666666667, -0.388888888888889, 0.277777777777778, 1.25,
        0.694444444444444, 0.138888888888889, -0.416666666666667, -0.75}},
      {{2, 1, 5},
       {{"scale_factor", std::vector<double>{2.0}}, {"mode", std::string("nearest")}},
       {2, 1, 10},
       {-1, -1, 0.75, 0.75, -0.25, -0.25, 1.5, 1.5,
        0.5, 0.5, -0.5, -0.5, 1.25, 1.25, 0.25, 0.25,
        -0.75, -0.75, 1, 1}},
      {{1, 1, 4, 5},
       {{"size", Ints{2, 3}}, {"mode", std::string("bilinear")}, {"align_corners", false}},
       {1, 1, 2, 3},
       {-0.166666666666667, 0, 0.625, -0.0833333333333334, 1, 0.25}},
      {{1, 1, 3, 4},
       {{"scale_factor", std::vector<double>{2.0}}, {"mode", std::string("bilinear")}, {"align_corners", false}},
       {1, 1, 6, 8},
       {-1, -0.5625, 0.3125, 0.5, 0, 0.1875, 1.0625, 1.5,
        -0.625, -0.359375, 0.171875, 0.359375, 0.203125, 0.390625, 0.921875, 1.1875,
        0.125, 0.046875, -0.109375, 0.078125, 0.609375, 0.796875, 0.640625, 0.5625,
        0.1875, 0.109375, -0.046875, 0.140625, 0.671875, 0.6875, 0.1875, -0.0625,
        -0.4375, -0.171875, 0.359375, 0.546875, 0.390625, 0.0625, -0.4375, -0.6875,
        -0.75, -0.3125, 0.5625, 0.75, 0.25, -0.25, -0.75, -1}},
      {{1, 1, 2, 3, 2},
       {{"scale_factor", std::vector<double>{1.5, 2.0, 1.0}}, {"mode", std::string("trilinear")}, {"align_corners", false}},
       {1, 1, 3, 6, 2},
       {-1, 0.75, -0.8125, 0.9375, -0.4375, 1.3125, -0.0625, 1,
        0.3125, 0, 0.5, -0.5, 0.125, 0.5, -0.0312500000000001, 0.6875,
        -0.34375, 1.0625, -0.3125, 0.75, 0.0625, -0.25, 0.25, -0.75,
        1.25, 0.25, 0.75, 0.4375, -0.25, 0.8125, -0.5625, 0.5,
        -0.1875, -0.5, 0, -1}},
      // clang-format on
  };
  for (const InterpCase& k : cases) {
    Tensor y = Run1("interpolate", {Pattern(dt, k.x)}, k.attrs);
    EXPECT_EQ(y.shape(), k.out);
    EXPECT_TRUE(AllClose(y, k.want, Tol(dt), Tol(dt)))
        << ShapeToString(k.x) << " -> " << ShapeToString(k.out);
  }
}

// softmax(q k^T * scale + bias) v from the definition.
std::vector<double> RefAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor* mask, bool causal, double scale) {
  const int64_t b = q.dim(0), l = q.dim(1), e = q.dim(2), s = k.dim(1), ev = v.dim(2);
  const std::vector<double> qv = q.ToDoubles(), kv = k.ToDoubles(), vv = v.ToDoubles();
  std::vector<double> out;
  for (int64_t n = 0; n < b; ++n) {
    for (int64_t i = 0; i < l; ++i) {
      std::vector<double> w(s);
      double top = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0;
        for (int64_t t = 0; t < e; ++t) dot += qv[(n * l + i) * e + t] * kv[(n * s + j) * e + t];
        w[j] = dot * scale;
        if (causal && j > i) w[j] = -std::numeric_limits<double>::infinity();
        if (mask && mask->dtype() == DType::kBool && mask->ElementAsDouble(i * s + j) == 0) {
          w[j] = -std::numeric_limits<double>::infinity();
        } else if (mask && mask->dtype() != DType::kBool) {
          w[j] += mask->ElementAsDouble(i * s + j);
        }
        top = std::max(top, w[j]);
      }
      double z = 0;
      for (double& x : w) z += (x = std::exp(x - top));
      for (int64_t t = 0; t < ev; ++t) {
        double acc = 0;
        for (int64_t j = 0; j < s; ++j) acc += w[j] / z * vv[(n * s + j) * ev + t];
        out.push_back(acc);
      }
    }
  }
  return out;
}

TEST_P(NormResampleAttentionTest, Attention) {
  const DType dt = GetParam();
  Tensor q = Random(dt, {2, 3, 4}, 16), k = Random(dt, {2, 5, 4}, 17),
         v = Random(dt, {2, 5, 3}, 18);
  const double tol = dt == kF32 ? 1e-5 : 1e-12;
  EXPECT_TRUE(AllClose(Run1("scaled_dot_product_attention", {q, k, v}),
                       RefAttention(q, k, v, nullptr, false, 0.5), tol, tol));
  EXPECT_TRUE(AllClose(Run1("scaled_dot_product_attention", {q, k, v}, {{"scale", 0.3}}),
                       RefAttention(q, k, v, nullptr, false, 0.3), tol, tol));
  EXPECT_TRUE(AllClose(Run1("scaled_dot_product_attention", {q, k, v}, {{"is_causal", true}}),
                       RefAttention(q, k, v, nullptr, true, 0.5), tol, tol));
  Tensor keep = Values(DType::kBool, {3, 5}, {1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1, 0, 0, 0});
  EXPECT_TRUE(AllClose(Run1("scaled_dot_product_attention", {q, k, v, keep}),
                       RefAttention(q, k, v, &keep, false, 0.5), tol, tol));
  Tensor bias = Random(dt, {3, 5}, 19);
  EXPECT_TRUE(AllClose(Run1("scaled_dot_product_attention", {q, k, v, bias}, {{"scale", 1.0}}),
                       RefAttention(q, k, v, &bias, false, 1.0), tol, tol));
  // A causal mask with more keys than queries stays top-left aligned; heads broadcast.
  Tensor q4 = Random(dt, {2, 2, 3, 4}, 20), k4 = Random(dt, {2, 2, 5, 4}, 21),
         v4 = Random(dt, {2, 2, 5, 3}, 22);
  Tensor y4 = Run1("scaled_dot_product_attention", {q4, k4, v4}, {{"is_causal", true}});
  EXPECT_TRUE(AllClose(y4,
                       RefAttention(q4.Reshaped({4, 3, 4}), k4.Reshaped({4, 5, 4}),
                                    v4.Reshaped({4, 5, 3}), nullptr, true, 0.5),
                       tol, tol));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NormResampleAttentionTest, ::testing::Values(kF32, kF64),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// oneDNN (f32) against the f64 loops on sizes large enough to take the oneDNN paths.
TEST(NormResampleAttentionAgreement, OneDnnMatchesLoops) {
  auto both = [](const std::string& op, std::vector<Tensor> in64, const AttrMap& attrs,
                 double tol) {
    std::vector<Tensor> in32;
    for (const Tensor& t : in64) {
      in32.push_back(IsFloat(t.dtype()) ? Run1("to_dtype", {t}, {{"dtype", std::string("f32")}})
                                        : t);
    }
    auto a = RunOp(op, in64, attrs), b = RunOp(op, in32, attrs);
    ASSERT_TRUE(a.ok() && b.ok()) << op;
    for (size_t k = 0; k < a->size(); ++k) {
      EXPECT_TRUE(AllClose((*b)[k], (*a)[k].ToDoubles(), tol, tol)) << op << " output " << k;
    }
  };
  Tensor x = Random(kF64, {8, 16, 9, 7}, 30, -2, 3);
  Tensor w = Random(kF64, {16}, 31), b = Random(kF64, {16}, 32);
  Tensor m = Random(kF64, {16}, 33), v = Random(kF64, {16}, 34, 0.5, 2);
  both("native_batch_norm", {x, w, b}, {{"training", true}}, 1e-4);
  both("native_batch_norm", {x, w, b, m, v}, {{"training", false}}, 1e-4);
  Tensor gy = Random(kF64, {8, 16, 9, 7}, 35);
  auto train = RunOp("native_batch_norm", {x, w, b}, {{"training", true}});
  ASSERT_TRUE(train.ok());
  both("native_batch_norm_backward", {gy, x, w, (*train)[1], (*train)[2]}, {{"training", true}},
       1e-3);
  both("native_batch_norm_backward", {gy, x, w, m, v}, {{"training", false}}, 1e-3);
  const std::vector<AttrMap> resample = {
      {{"scale_factor", 2.0}, {"mode", std::string("bilinear")}},
      {{"size", Ints{18, 21}}, {"mode", std::string("nearest")}},
      {{"size", Ints{5, 4}}, {"mode", std::string("bilinear")}},
      {{"size", Ints{13, 11}}, {"mode", std::string("bilinear")}, {"align_corners", true}},
      {{"scale_factor", 1.5}, {"mode", std::string("nearest")}}};
  for (const AttrMap& a : resample) both("interpolate", {x}, a, 1e-5);
  Tensor up = Run1("interpolate", {x}, {{"scale_factor", 2.0}, {"mode", std::string("bilinear")}});
  Tensor g = Random(kF64, up.shape(), 36);
  for (const std::string& mode : {"linear", "nearest"}) {
    both("upsample_backward", {g},
         {{"output_size", Ints{18, 14}},
          {"scales", std::vector<double>{2.0, 2.0}},
          {"mode", mode},
          {"input_size", x.shape()}},
         1e-4);
  }
}

TEST(NormResampleAttentionAgreement, OneDnnKernelsMatchF32Loops) {
  Tensor x = Random(kF32, {6, 5, 7, 3}, 60, -2, 3), gy = Random(kF32, {6, 5, 7, 3}, 61);
  Tensor w = Random(kF32, {5}, 62), b = Random(kF32, {5}, 63);
  Tensor m = Random(kF32, {5}, 64), v = Random(kF32, {5}, 65, 0.5, 2);
  for (bool training : {true, false}) {
    const AttrMap a = {{"training", training}, {"eps", 1e-3}};
    std::vector<Tensor> in = {x, w, b};
    if (!training) in = {x, w, b, m, v};
    EXPECT_TRUE(SameAsLoop("native_batch_norm", in, a, 1e-5)) << training;
    EXPECT_TRUE(SameAsLoop("native_batch_norm_backward", {gy, x, w, m, v}, a, 1e-4)) << training;
  }
  // Geometries oneDNN computes itself, and ones it hands to the loops.
  for (const auto& [size, mode, align] :
       std::vector<std::tuple<Ints, std::string, bool>>{{{14, 6}, "linear", false},
                                                        {{3, 2}, "linear", false},
                                                        {{21, 9}, "nearest", false},
                                                        {{10, 5}, "nearest", false},
                                                        {{14, 6}, "linear", true}}) {
    const AttrMap a = {{"output_size", size},
                       {"scales", std::vector<double>{0.0, 0.0}},
                       {"mode", mode},
                       {"align_corners", align}};
    EXPECT_TRUE(SameAsLoop("upsample", {x}, a, 1e-5)) << mode << " " << size[0];
    AttrMap back = a;
    back["input_size"] = x.shape();
    Shape out = x.shape();
    out[2] = size[0];
    out[3] = size[1];
    EXPECT_TRUE(SameAsLoop("upsample_backward", {Random(kF32, out, 66)}, back, 1e-5))
        << mode << " " << size[0];
  }
}

TEST(NormResampleAttentionErrors, Reasons) {
  auto reason = [](const std::string& op, std::vector<Tensor> in, const AttrMap& attrs) {
    return GetReason(RunOp(op, std::move(in), attrs).status());
  };
  Tensor x = Random(kF64, {2, 4, 3}, 40);
  Tensor c4 = Random(kF64, {4}, 41), c3 = Random(kF64, {3}, 42);
  EXPECT_EQ(reason("batch_norm", {x}, {}), Reason::kBadOperand);  // eval needs running stats
  EXPECT_EQ(reason("batch_norm", {x, c3, c3}, {{"training", true}}), Reason::kShapeMismatch);
  EXPECT_EQ(reason("batch_norm", {Random(kF64, {1, 4}, 43)}, {{"training", true}}),
            Reason::kShapeMismatch);  // one value per channel
  EXPECT_EQ(reason("batch_norm", {x, Random(DType::kF32, {4}, 44), c4}, {}),
            Reason::kDtypeMismatch);
  EXPECT_EQ(reason("batch_norm", {Random(kF64, {4}, 45)}, {{"training", true}}),
            Reason::kShapeMismatch);
  EXPECT_EQ(reason("group_norm", {x}, {{"num_groups", int64_t{3}}}), Reason::kBadAttribute);
  EXPECT_EQ(reason("group_norm", {x}, {{"num_groups", int64_t{0}}}), Reason::kBadAttribute);
  EXPECT_EQ(reason("group_norm", {x, c3}, {{"num_groups", int64_t{2}}}), Reason::kShapeMismatch);
  auto neg_eps = RunOp("group_norm", {x}, {{"num_groups", int64_t{2}}, {"eps", -1.0}});
  EXPECT_EQ(GetReason(neg_eps.status()), Reason::kBadAttribute);
  EXPECT_EQ(GetMetadata(neg_eps.status())["op"], "group_norm");
  EXPECT_EQ(reason("interpolate", {x}, {}), Reason::kBadAttribute);  // neither size nor scale
  EXPECT_EQ(reason("interpolate", {x}, {{"size", Ints{4}}, {"scale_factor", 2.0}}),
            Reason::kBadAttribute);
  EXPECT_EQ(reason("interpolate", {x}, {{"size", Ints{4}}, {"mode", std::string("bilinear")}}),
            Reason::kShapeMismatch);
  EXPECT_EQ(reason("interpolate", {x}, {{"size", Ints{4}}, {"align_corners", true}}),
            Reason::kBadAttribute);  // nearest takes no align_corners
  EXPECT_EQ(reason("interpolate", {x}, {{"scale_factor", 0.1}}), Reason::kShapeMismatch);
  EXPECT_EQ(reason("interpolate", {x}, {{"size", Ints{4, 5}}}), Reason::kBadAttribute);
  Tensor q = Random(kF64, {2, 3, 4}, 46);
  EXPECT_EQ(reason("scaled_dot_product_attention", {q, q, q}, {{"dropout_p", 0.1}}),
            Reason::kBadAttribute);
  EXPECT_EQ(reason("scaled_dot_product_attention", {q, Random(kF64, {2, 3, 5}, 47), q}, {}),
            Reason::kShapeMismatch);
  EXPECT_EQ(reason("scaled_dot_product_attention",
                   {q, q, q, Values(DType::kBool, {3, 3}, std::vector<double>(9, 1))},
                   {{"is_causal", true}}),
            Reason::kBadOperand);
}

}  // namespace
}  // namespace tensord
