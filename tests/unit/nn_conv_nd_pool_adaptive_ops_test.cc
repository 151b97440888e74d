// conv1d, conv3d, conv_transpose1d, conv_transpose2d, max_pool1d, avg_pool1d,
// adaptive_avg_pool2d and adaptive_max_pool2d against references written from PyTorch's
// definitions, on f32 (oneDNN where it applies) and f64 (loops); the oneDNN kernels against the
// loop ones on the same values; hand-computed values; error cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "server/backends/cpu/kernel_table.h"
#include "server/core/status.h"
#include "server/ops/registry.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

using Ints = std::vector<int64_t>;
using A3 = std::array<int64_t, 3>;
double Tol(DType d) { return d == DType::kF32 ? 2e-4 : 1e-10; }

struct ConvCase {
  Shape x, w;
  Ints stride, padding, dilation, output_padding;
  int64_t groups;
  bool bias;
};

AttrMap AttrsOf(const ConvCase& k, bool transposed) {
  AttrMap m = {
      {"stride", k.stride}, {"padding", k.padding}, {"dilation", k.dilation}, {"groups", k.groups}};
  if (transposed) m["output_padding"] = k.output_padding;
  return m;
}

// An attribute of `sp` values (or one value for all) as three, unit dims first.
A3 Three(const Ints& v, int sp, int64_t unit) {
  A3 r = {unit, unit, unit};
  for (int i = 0; i < sp; ++i) r[3 - sp + i] = v.size() == 1 ? v[0] : v[i];
  return r;
}

// Convolution (or transposed convolution) over `sp` spatial dims from the definitions:
// conv:       y[n, o, q] = b[o] + sum_{c, t} x[n, g * C/G + c, q * s - p + t * d] * w[o, c, t]
// transposed: y[n, g * O/G + o, i * s - p + t * d] += x[n, c, i] * w[c, o, t] for c in group g.
std::vector<double> RefConv(const Tensor& x, const Tensor& w, const Tensor* b, const ConvCase& k,
                            int sp, bool transposed, Shape* out_shape) {
  const bool batched = x.rank() == sp + 2;
  const int64_t N = batched ? x.dim(0) : 1, C = x.dim(batched ? 1 : 0);
  A3 in, kk;
  for (int i = 0; i < 3; ++i) {
    const int j = i - (3 - sp);
    in[i] = j < 0 ? 1 : x.dim(x.rank() - sp + j);
    kk[i] = j < 0 ? 1 : w.dim(2 + j);
  }
  const A3 s = Three(k.stride, sp, 1), p = Three(k.padding, sp, 0), d = Three(k.dilation, sp, 1);
  const A3 op = transposed ? Three(k.output_padding, sp, 0) : A3{0, 0, 0};
  const int64_t G = k.groups;
  const int64_t O = transposed ? w.dim(1) * G : w.dim(0);
  A3 out;
  for (int i = 0; i < 3; ++i) {
    out[i] = transposed ? (in[i] - 1) * s[i] - 2 * p[i] + d[i] * (kk[i] - 1) + op[i] + 1
                        : (in[i] + 2 * p[i] - d[i] * (kk[i] - 1) - 1) / s[i] + 1;
  }
  const std::vector<double> xv = x.ToDoubles(), wv = w.ToDoubles();
  const int64_t taps = kk[0] * kk[1] * kk[2], in_plane = in[0] * in[1] * in[2],
                out_plane = out[0] * out[1] * out[2];
  std::vector<double> y(N * O * out_plane, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < O; ++o) {
      for (int64_t q = 0; q < out_plane; ++q)
        y[(n * O + o) * out_plane + q] = b ? b->ElementAsDouble(o) : 0;
    }
  }
  auto at = [](const A3& pos, const A3& size) {
    return (pos[0] * size[1] + pos[1]) * size[2] + pos[2];
  };
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t t = 0; t < taps; ++t) {
      const A3 tap = {t / (kk[1] * kk[2]), (t / kk[2]) % kk[1], t % kk[2]};
      if (!transposed) {
        const int64_t CG = w.dim(1);
        for (int64_t o = 0; o < O; ++o) {
          const int64_t g = o / (O / G);
          for (int64_t q = 0; q < out_plane; ++q) {
            const A3 qp = {q / (out[1] * out[2]), (q / out[2]) % out[1], q % out[2]};
            A3 src;
            bool inside = true;
            for (int i = 0; i < 3; ++i) {
              src[i] = qp[i] * s[i] - p[i] + tap[i] * d[i];
              inside &= src[i] >= 0 && src[i] < in[i];
            }
            if (!inside) continue;
            for (int64_t c = 0; c < CG; ++c) {
              y[(n * O + o) * out_plane + q] +=
                  xv[(n * C + g * CG + c) * in_plane + at(src, in)] * wv[(o * CG + c) * taps + t];
            }
          }
        }
      } else {
        const int64_t OG = w.dim(1), CG = C / G;
        for (int64_t c = 0; c < C; ++c) {
          const int64_t g = c / CG;
          for (int64_t i = 0; i < in_plane; ++i) {
            const A3 ip = {i / (in[1] * in[2]), (i / in[2]) % in[1], i % in[2]};
            A3 dst;
            bool inside = true;
            for (int j = 0; j < 3; ++j) {
              dst[j] = ip[j] * s[j] - p[j] + tap[j] * d[j];
              inside &= dst[j] >= 0 && dst[j] < out[j];
            }
            if (!inside) continue;
            for (int64_t o = 0; o < OG; ++o) {
              y[(n * O + g * OG + o) * out_plane + at(dst, out)] +=
                  xv[(n * C + c) * in_plane + i] * wv[(c * OG + o) * taps + t];
            }
          }
        }
      }
    }
  }
  Shape shape = batched ? Shape{N, O} : Shape{O};
  for (int i = 3 - sp; i < 3; ++i) shape.push_back(out[i]);
  *out_shape = shape;
  return y;
}

void CheckConv(const std::string& op, DType dt, const std::vector<ConvCase>& cases, int sp,
               bool transposed) {
  uint32_t seed = 1;
  for (const ConvCase& k : cases) {
    Tensor x = Random(dt, k.x, seed++), w = Random(dt, k.w, seed++);
    const int64_t channels = transposed ? k.w[1] * k.groups : k.w[0];
    Tensor b = Random(dt, {channels}, seed++);
    std::vector<Tensor> in = {x, w};
    if (k.bias) in.push_back(b);
    Tensor y = Run1(op, in, AttrsOf(k, transposed));
    ASSERT_TRUE(y.defined()) << op << " " << ShapeToString(k.x);
    Shape want;
    std::vector<double> ref = RefConv(x, w, k.bias ? &b : nullptr, k, sp, transposed, &want);
    EXPECT_EQ(y.shape(), want) << op << " " << ShapeToString(k.x);
    EXPECT_TRUE(AllClose(y, ref, Tol(dt), Tol(dt))) << op << " " << ShapeToString(k.x);
  }
}

class ConvNdPoolTest : public ::testing::TestWithParam<DType> {};

TEST_P(ConvNdPoolTest, Conv1d) {
  CheckConv("conv1d", GetParam(),
            {{{2, 3, 9}, {4, 3, 3}, {1}, {0}, {1}, {}, 1, true},
             {{2, 4, 11}, {6, 2, 3}, {2}, {1}, {2}, {}, 2, true},
             {{1, 3, 8}, {3, 1, 2}, {3}, {2}, {1}, {}, 3, false},
             {{3, 7}, {2, 3, 4}, {1}, {1}, {1}, {}, 1, true},
             {{0, 2, 5}, {3, 2, 2}, {1}, {0}, {1}, {}, 1, true}},
            1, false);
}

TEST_P(ConvNdPoolTest, Conv3d) {
  CheckConv("conv3d", GetParam(),
            {{{2, 3, 5, 4, 6}, {4, 3, 3, 2, 3}, {1}, {0}, {1}, {}, 1, true},
             {{1, 4, 6, 7, 5}, {6, 2, 3, 3, 2}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1}, {}, 2, true},
             {{2, 4, 5, 5}, {3, 2, 2, 2, 2}, {2}, {0}, {1}, {}, 1, false},
             {{1, 2, 4, 4, 4}, {2, 1, 1, 1, 1}, {1}, {0}, {1}, {}, 2, true},
             {{0, 2, 3, 3, 3}, {2, 2, 2, 2, 2}, {1}, {0}, {1}, {}, 1, true}},
            3, false);
}

TEST_P(ConvNdPoolTest, ConvTranspose1d) {
  CheckConv("conv_transpose1d", GetParam(),
            {{{2, 3, 6}, {3, 4, 3}, {1}, {0}, {1}, {0}, 1, true},
             {{1, 4, 5}, {4, 2, 3}, {2}, {1}, {1}, {1}, 2, true},
             {{2, 5}, {2, 3, 2}, {3}, {0}, {2}, {1}, 1, false},
             {{1, 2, 4}, {2, 1, 3}, {1}, {0}, {3}, {2}, 1, true}},
            1, true);
}

TEST_P(ConvNdPoolTest, ConvTranspose2d) {
  CheckConv("conv_transpose2d", GetParam(),
            {{{2, 3, 4, 5}, {3, 2, 3, 3}, {1}, {0}, {1}, {0}, 1, true},
             {{1, 4, 5, 4}, {4, 3, 3, 2}, {2, 1}, {1, 0}, {1}, {1, 0}, 2, true},
             {{2, 2, 3, 3}, {2, 2, 2, 3}, {2, 3}, {0, 1}, {2, 1}, {1, 2}, 1, false},
             {{3, 4, 4}, {3, 2, 2, 2}, {2}, {1}, {1}, {0}, 1, true},
             // output_padding of at least the stride (allowed under a larger dilation).
             {{1, 2, 3, 4}, {2, 2, 2, 2}, {1}, {0}, {3}, {2, 1}, 1, true},
             {{0, 2, 3, 3}, {2, 3, 2, 2}, {1}, {0}, {1}, {0}, 1, true}},
            2, true);
}

// PyTorch's pooling_output_shape, written out.
int64_t PoolOut(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil_mode) {
  const double len = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / s;
  int64_t out = static_cast<int64_t>(ceil_mode ? std::ceil(len) : std::floor(len)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

struct Pool1dCase {
  Shape x;
  int64_t k, s, p, d;
  bool ceil_mode, count_include_pad;
};

TEST_P(ConvNdPoolTest, Pool1d) {
  const DType dt = GetParam();
  const std::vector<Pool1dCase> cases = {
      {{2, 3, 8}, 2, 2, 0, 1, false, true},  {{1, 2, 9}, 3, 2, 1, 1, false, true},
      {{1, 2, 9}, 3, 2, 1, 1, false, false}, {{2, 1, 10}, 3, 2, 1, 2, true, true},
      {{2, 2, 7}, 2, 3, 1, 1, true, true},   {{2, 2, 7}, 2, 3, 1, 1, true, false},
      {{3, 6}, 4, 1, 2, 1, false, true},     {{0, 2, 5}, 2, 1, 0, 1, false, true}};
  uint32_t seed = 20;
  for (const Pool1dCase& c : cases) {
    Tensor x = Random(dt, c.x, seed++);
    const int64_t L = c.x.back(), rows = x.numel() / std::max<int64_t>(L, 1);
    const std::vector<double> xv = x.ToDoubles();
    for (bool max_pool : {true, false}) {
      const int64_t d = max_pool ? c.d : 1;
      const int64_t out = PoolOut(L, c.k, c.p, c.s, d, c.ceil_mode);
      std::vector<double> ref;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t o = 0; o < out; ++o) {
          const int64_t start = o * c.s - c.p;
          if (max_pool) {
            double m = -std::numeric_limits<double>::infinity();
            for (int64_t j = 0; j < c.k; ++j) {
              const int64_t i = start + j * d;
              if (i >= 0 && i < L) m = std::max(m, xv[r * L + i]);
            }
            ref.push_back(m);
          } else {
            const int64_t end = std::min(start + c.k, L + c.p);
            const int64_t lo = std::max<int64_t>(start, 0), hi = std::min(end, L);
            double sum = 0;
            for (int64_t i = lo; i < hi; ++i) sum += xv[r * L + i];
            ref.push_back(sum / (c.count_include_pad ? end - start : hi - lo));
          }
        }
      }
      AttrMap a = {{"kernel_size", Ints{c.k}},
                   {"stride", Ints{c.s}},
                   {"padding", Ints{c.p}},
                   {"ceil_mode", c.ceil_mode}};
      if (max_pool) {
        a["dilation"] = Ints{c.d};
      } else {
        a["count_include_pad"] = c.count_include_pad;
      }
      const std::string op = max_pool ? "max_pool1d" : "avg_pool1d";
      Tensor y = Run1(op, {x}, a);
      ASSERT_TRUE(y.defined()) << op << " " << ShapeToString(c.x);
      Shape want = c.x;
      want.back() = out;
      EXPECT_EQ(y.shape(), want) << op;
      EXPECT_TRUE(AllClose(y, ref, Tol(dt), Tol(dt))) << op << " " << ShapeToString(c.x);
    }
  }
}

TEST_P(ConvNdPoolTest, AdaptivePools) {
  const DType dt = GetParam();
  const std::vector<std::pair<Shape, Ints>> cases = {{{2, 3, 5, 7}, {3, 4}}, {{1, 2, 6, 6}, {3}},
                                                     {{2, 1, 4, 5}, {1, 1}}, {{1, 1, 3, 3}, {5, 4}},
                                                     {{3, 7, 5}, {2, 3}},    {{1, 2, 4, 4}, {0, 2}},
                                                     {{0, 2, 4, 4}, {2}}};
  uint32_t seed = 40;
  for (const auto& [shape, size] : cases) {
    Tensor x = Random(dt, shape, seed++);
    const int64_t H = shape[shape.size() - 2], W = shape.back();
    const int64_t OH = size[0], OW = size.size() == 1 ? size[0] : size[1];
    const int64_t planes = x.numel() / (H * W);
    const std::vector<double> xv = x.ToDoubles();
    std::vector<double> avg, mx;
    for (int64_t pl = 0; pl < planes; ++pl) {
      for (int64_t i = 0; i < OH; ++i) {
        const auto hs = static_cast<int64_t>(std::floor(static_cast<double>(i * H) / OH));
        const auto he = static_cast<int64_t>(std::ceil(static_cast<double>((i + 1) * H) / OH));
        for (int64_t j = 0; j < OW; ++j) {
          const auto ws = static_cast<int64_t>(std::floor(static_cast<double>(j * W) / OW));
          const auto we = static_cast<int64_t>(std::ceil(static_cast<double>((j + 1) * W) / OW));
          double sum = 0, m = -std::numeric_limits<double>::infinity();
          for (int64_t h = hs; h < he; ++h) {
            for (int64_t v = ws; v < we; ++v) {
              sum += xv[(pl * H + h) * W + v];
              m = std::max(m, xv[(pl * H + h) * W + v]);
            }
          }
          avg.push_back(sum / ((he - hs) * (we - ws)));
          mx.push_back(m);
        }
      }
    }
    Shape want = shape;
    want[want.size() - 2] = OH;
    want.back() = OW;
    for (const std::string op : {"adaptive_avg_pool2d", "adaptive_max_pool2d"}) {
      Tensor y = Run1(op, {x}, {{"output_size", size}});
      ASSERT_TRUE(y.defined()) << op << " " << ShapeToString(shape);
      EXPECT_EQ(y.shape(), want) << op;
      EXPECT_TRUE(AllClose(y, op == "adaptive_avg_pool2d" ? avg : mx, Tol(dt), Tol(dt)))
          << op << " " << ShapeToString(shape);
    }
  }
}

TEST_P(ConvNdPoolTest, HandValues) {
  const DType dt = GetParam();
  // Each input element scatters the kernel scaled by itself, two apart; overlaps add.
  Tensor y =
      Run1("conv_transpose1d", {Values(dt, {1, 1, 2}, {1, 2}), Values(dt, {1, 1, 3}, {1, 10, 100})},
           {{"stride", Ints{2}}});
  EXPECT_TRUE(AllClose(y, {1, 10, 102, 20, 200}));
  // 1-d windows of [1, 3, 2, 5, 4] with kernel 2, stride 2, padding 1: [pad 1] [3 2] [5 4].
  Tensor x = Values(dt, {1, 1, 5}, {1, 3, 2, 5, 4});
  AttrMap a = {{"kernel_size", Ints{2}}, {"padding", Ints{1}}};
  EXPECT_TRUE(AllClose(Run1("max_pool1d", {x}, a), {1, 3, 5}));
  EXPECT_TRUE(AllClose(Run1("avg_pool1d", {x}, a), {0.5, 2.5, 4.5}));
  // 2 x 3 to 1 x 2: column windows [0, 2) and [1, 3) overlap.
  EXPECT_TRUE(AllClose(Run1("adaptive_avg_pool2d", {Values(dt, {1, 2, 3}, {1, 2, 3, 4, 5, 6})},
                            {{"output_size", Ints{1, 2}}}),
                       {3, 4}));
  EXPECT_TRUE(
      AllClose(Run1("adaptive_max_pool2d", {Values(dt, {1, 3, 3}, {1, 9, 2, 3, 4, 8, 7, 5, 6})},
                    {{"output_size", Ints{2}}}),
               {9, 9, 7, 8}));
  // conv1d of [1, 2, 3, 4] with [1, -1], dilation 2: x[i] - x[i + 2].
  EXPECT_TRUE(
      AllClose(Run1("conv1d", {Values(dt, {1, 4}, {1, 2, 3, 4}), Values(dt, {1, 1, 2}, {1, -1})},
                    {{"dilation", Ints{2}}}),
               {-2, -2}));
}

TEST_P(ConvNdPoolTest, AdaptiveMaxPropagatesNan) {
  const DType dt = GetParam();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor y = Run1("adaptive_max_pool2d", {Values(dt, {1, 2, 2}, {1, nan, 3, 4})},
                  {{"output_size", Ints{1, 2}}});
  EXPECT_TRUE(AllClose(y, {3, nan}));
}

INSTANTIATE_TEST_SUITE_P(Float, ConvNdPoolTest, ::testing::Values(DType::kF32, DType::kF64),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// The oneDNN kernels (f32) against the loop kernels (f64) on the same values, for the forward
// ops and the internal gradient ops.
TEST(ConvNdPoolOneDnn, AgreesWithLoops) {
  struct Call {
    std::string op;
    Shape a, b;
    AttrMap attrs;
  };
  const AttrMap t2 = {{"stride", Ints{2, 1}},
                      {"padding", Ints{1}},
                      {"output_padding", Ints{1, 0}},
                      {"groups", int64_t{2}},
                      {"dilation", Ints{1, 2}}};
  const AttrMap c3 = {{"stride", Ints{1, 2, 1}},
                      {"padding", Ints{1, 0, 1}},
                      {"dilation", Ints{2, 1, 1}},
                      {"groups", int64_t{2}}};
  const AttrMap c3_big = {{"stride", Ints{2}}, {"padding", Ints{1}}};
  const AttrMap t2_big = {{"stride", Ints{2}}, {"padding", Ints{1}}, {"output_padding", Ints{1}}};
  auto with = [](AttrMap m, const std::string& k, Ints v) {
    m[k] = std::move(v);
    return m;
  };
  const std::vector<Call> calls = {{"conv3d", {2, 4, 6, 5, 5}, {6, 2, 3, 2, 3}, c3},
                                   {"conv3d_backward_input",
                                    {2, 6, 4, 2, 5},
                                    {6, 2, 3, 2, 3},
                                    with(c3, "input_size", {2, 4, 6, 5, 5})},
                                   {"conv3d_backward_weight",
                                    {2, 6, 4, 2, 5},
                                    {2, 4, 6, 5, 5},
                                    with(c3, "weight_size", {6, 2, 3, 2, 3})},
                                   {"conv_transpose2d", {2, 4, 5, 4}, {4, 3, 3, 2}, t2},
                                   {"conv_transpose2d_backward_input",
                                    {2, 6, 10, 4},
                                    {4, 3, 3, 2},
                                    with(t2, "input_size", {2, 4, 5, 4})},
                                   {"conv_transpose2d_backward_weight",
                                    {2, 6, 10, 4},
                                    {2, 4, 5, 4},
                                    with(t2, "weight_size", {4, 3, 3, 2})},
                                   // Channel counts for which oneDNN picks blocked layouts.
                                   {"conv3d", {2, 16, 7, 7, 7}, {32, 16, 3, 3, 3}, c3_big},
                                   {"conv3d_backward_input",
                                    {2, 32, 4, 4, 4},
                                    {32, 16, 3, 3, 3},
                                    with(c3_big, "input_size", {2, 16, 7, 7, 7})},
                                   {"conv3d_backward_weight",
                                    {2, 32, 4, 4, 4},
                                    {2, 16, 7, 7, 7},
                                    with(c3_big, "weight_size", {32, 16, 3, 3, 3})},
                                   {"conv_transpose2d", {2, 32, 9, 9}, {32, 16, 3, 3}, t2_big},
                                   {"conv_transpose2d_backward_input",
                                    {2, 16, 18, 18},
                                    {32, 16, 3, 3},
                                    with(t2_big, "input_size", {2, 32, 9, 9})},
                                   {"conv_transpose2d_backward_weight",
                                    {2, 16, 18, 18},
                                    {2, 32, 9, 9},
                                    with(t2_big, "weight_size", {32, 16, 3, 3})}};
  uint32_t seed = 60;
  for (const Call& c : calls) {
    const cpu::Kernel* k = cpu::KernelTable::Get().Find(
        **OpRegistry::Builtin().Find(c.op), std::vector<DType>{DType::kF32, DType::kF32}, nullptr);
    ASSERT_NE(k, nullptr) << c.op;
    EXPECT_EQ(k->name, "onednn_" + c.op);
    Tensor a = Random(DType::kF32, c.a, seed++), b = Random(DType::kF32, c.b, seed++);
    Tensor y32 = Run1(c.op, {a, b}, c.attrs);
    const AttrMap f64 = {{"dtype", std::string("f64")}};
    Tensor y64 = Run1(c.op, {Run1("to_dtype", {a}, f64), Run1("to_dtype", {b}, f64)}, c.attrs);
    ASSERT_TRUE(y32.defined() && y64.defined()) << c.op;
    EXPECT_EQ(y32.shape(), y64.shape()) << c.op;
    EXPECT_TRUE(AllClose(y32, y64.ToDoubles(), 1e-4, 1e-4)) << c.op;
  }
}

TEST(ConvNdPool, EveryOpHasACpuKernel) {
  for (const char* op : {"conv1d", "conv3d", "conv_transpose1d", "conv_transpose2d", "max_pool1d",
                         "avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d"}) {
    auto def = TestDispatcher().registry().Find(op);
    ASSERT_TRUE(def.ok()) << op;
    EXPECT_EQ((*def)->marking, Marking::kDifferentiable) << op;
    EXPECT_EQ(TestDispatcher().BackendsFor(**def), std::vector<std::string>{"cpu"}) << op;
  }
}

TEST(ConvNdPool, ConvErrors) {
  Tensor x3 = Random(DType::kF32, {1, 4, 5, 5, 5}, 1), w3 = Random(DType::kF32, {2, 4, 3, 3, 3}, 2);
  auto reason = [](const absl::StatusOr<std::vector<Tensor>>& r) { return GetReason(r.status()); };
  EXPECT_EQ(reason(RunOp("conv3d", {x3, Random(DType::kF32, {2, 4, 3, 3}, 3)})),
            Reason::kShapeMismatch);
  EXPECT_EQ(reason(RunOp("conv3d", {x3, w3}, {{"groups", int64_t{2}}})), Reason::kShapeMismatch);
  EXPECT_EQ(reason(RunOp("conv3d", {x3, w3, Random(DType::kF32, {3}, 4)})), Reason::kShapeMismatch);
  EXPECT_EQ(reason(RunOp("conv3d", {x3, w3}, {{"stride", Ints{1, 1}}})), Reason::kBadAttribute);
  EXPECT_EQ(reason(RunOp("conv3d", {x3, w3}, {{"padding", Ints{-1}}})), Reason::kBadAttribute);
  EXPECT_EQ(reason(RunOp("conv3d", {Random(DType::kF32, {1, 4, 2, 2, 2}, 5), w3})),
            Reason::kShapeMismatch);
  EXPECT_EQ(reason(RunOp("conv3d", {x3, Random(DType::kF64, {2, 4, 3, 3, 3}, 6)})),
            Reason::kDtypeMismatch);

  Tensor x2 = Random(DType::kF32, {1, 4, 3, 3}, 7), w2 = Random(DType::kF32, {4, 2, 2, 2}, 8);
  // output_padding must be smaller than the stride or the dilation.
  EXPECT_EQ(reason(RunOp("conv_transpose2d", {x2, w2}, {{"output_padding", Ints{1}}})),
            Reason::kBadAttribute);
  EXPECT_TRUE(
      RunOp("conv_transpose2d", {x2, w2}, {{"output_padding", Ints{1}}, {"stride", Ints{2}}}).ok());
  // Input channels are the weight's first dim for a transposed convolution.
  EXPECT_EQ(reason(RunOp("conv_transpose2d", {Random(DType::kF32, {1, 2, 3, 3}, 9), w2})),
            Reason::kShapeMismatch);
  EXPECT_EQ(reason(RunOp("conv_transpose2d", {x2, w2}, {{"groups", int64_t{3}}})),
            Reason::kShapeMismatch);
  // A bias has the output channels: weight[1] * groups.
  EXPECT_TRUE(
      RunOp("conv_transpose2d", {x2, w2, Random(DType::kF32, {4}, 10)}, {{"groups", int64_t{2}}})
          .ok());
  EXPECT_EQ(reason(RunOp("conv_transpose2d", {x2, w2, Random(DType::kF32, {2}, 10)},
                         {{"groups", int64_t{2}}})),
            Reason::kShapeMismatch);
  // Output too small: (1 - 1) * 1 - 2 * 1 + 2 = 0.
  EXPECT_EQ(reason(RunOp("conv_transpose2d", {Random(DType::kF32, {1, 4, 1, 1}, 11), w2},
                         {{"padding", Ints{1}}})),
            Reason::kShapeMismatch);
  // The 1-d ops check their own shapes and name themselves.
  absl::StatusOr<std::vector<Tensor>> r = RunOp("conv1d", {x2, Random(DType::kF32, {2, 4, 3}, 12)});
  EXPECT_EQ(GetReason(r.status()), Reason::kShapeMismatch);
  EXPECT_NE(r.status().message().find("conv1d"), absl::string_view::npos) << r.status();
  EXPECT_EQ(reason(RunOp("conv_transpose1d",
                         {Random(DType::kF32, {1, 4, 3}, 13), Random(DType::kF32, {4, 2, 2}, 14)},
                         {{"stride", Ints{2, 2}}})),
            Reason::kBadAttribute);
}

TEST(ConvNdPool, PoolErrors) {
  Tensor x = Random(DType::kF32, {1, 2, 6}, 1);
  auto reason = [](const absl::StatusOr<std::vector<Tensor>>& r) { return GetReason(r.status()); };
  EXPECT_EQ(reason(RunOp("max_pool1d", {x})), Reason::kBadAttribute);
  EXPECT_EQ(reason(RunOp("max_pool1d", {x}, {{"kernel_size", Ints{2, 2}}})), Reason::kBadAttribute);
  EXPECT_EQ(reason(RunOp("avg_pool1d", {x}, {{"kernel_size", Ints{3}}, {"padding", Ints{2}}})),
            Reason::kBadAttribute);
  EXPECT_EQ(reason(RunOp("max_pool1d", {x}, {{"kernel_size", Ints{7}}})), Reason::kShapeMismatch);
  EXPECT_EQ(reason(RunOp("max_pool1d", {Random(DType::kF32, {1, 1, 2, 6}, 2)},
                         {{"kernel_size", Ints{2}}})),
            Reason::kShapeMismatch);
  EXPECT_EQ(reason(RunOp("adaptive_avg_pool2d", {Random(DType::kF32, {2, 6}, 6)},
                         {{"output_size", Ints{2}}})),
            Reason::kShapeMismatch);
  // -1 keeps that dim's input size (PyTorch's None); below it is refused.
  auto kept = RunOp("adaptive_max_pool2d", {Random(DType::kF32, {1, 2, 4, 5}, 3)},
                    {{"output_size", Ints{-1, 2}}});
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ((*kept)[0].shape(), (Shape{1, 2, 4, 2}));
  EXPECT_EQ(reason(RunOp("adaptive_max_pool2d", {Random(DType::kF32, {1, 2, 4, 4}, 3)},
                         {{"output_size", Ints{-2, 2}}})),
            Reason::kBadAttribute);
  EXPECT_EQ(reason(RunOp("adaptive_avg_pool2d", {Random(DType::kF32, {1, 0, 4, 4}, 4)},
                         {{"output_size", Ints{2}}})),
            Reason::kShapeMismatch);
  EXPECT_EQ(reason(RunOp("adaptive_avg_pool2d", {Random(DType::kF32, {1, 2, 4, 4}, 5)})),
            Reason::kBadAttribute);
}

}  // namespace
}  // namespace tensord
