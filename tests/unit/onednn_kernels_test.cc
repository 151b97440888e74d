// The oneDNN kernels: which calls they claim, their results against plain references written
// here and against the loop kernels they shadow (run directly through the kernel table), the
// primitive cache, and the dnnl::error conversion.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <thread>

#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/onednn_common.h"
#include "server/core/host_memory.h"
#include "server/core/process_malloc.h"
#include "server/core/status.h"
#include "server/ops/registry.h"
#include "tests/support/onednn_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;
using cpu::KernelTable;
using Ints = std::vector<int64_t>;

constexpr DType kF32 = DType::kF32;

std::string KernelName(const std::string& op, std::vector<DType> dtypes, const AttrMap& attrs) {
  auto def = OpRegistry::Builtin().Find(op);
  if (!def.ok()) return "no op " + op;
  auto validated = ValidateAttrs(op, (*def)->attrs, attrs);
  if (!validated.ok()) return "bad attrs";
  const cpu::Kernel* k = KernelTable::Get().Find(**def, dtypes, &*validated);
  return k ? k->name : "none";
}

// ---- which calls oneDNN claims ----------------------------------------------------------------

// The kernel the CPU backend plans for a call of these input shapes (f32), as the dispatcher
// asks: shapes a oneDNN kernel does not reproduce choose the loop kernel before any output is
// allocated, instead of the oneDNN kernel handing the call on when it runs.
std::string PlannedKernel(const std::string& op, const std::vector<Shape>& shapes,
                          const AttrMap& attrs) {
  auto def = OpRegistry::Builtin().Find(op);
  if (!def.ok()) return "no op " + op;
  auto validated = ValidateAttrs(op, (*def)->attrs, attrs);
  if (!validated.ok()) return "bad attrs";
  std::vector<TensorMeta> metas;
  std::vector<DType> dtypes;
  for (const Shape& s : shapes) {
    metas.push_back({kF32, s});
    dtypes.push_back(kF32);
  }
  auto out = (*def)->infer(metas, *validated);
  if (!out.ok()) return "bad shapes";
  const cpu::Kernel* k = KernelTable::Get().Plan({**def, dtypes, &*validated, metas, *out});
  return k ? k->name : "none";
}

TEST(OneDnn, PlanningChoosesTheLoopKernelForShapesOneDnnDeclines) {
  const Shape big = {130, 131};
  EXPECT_EQ(PlannedKernel("add", {big, big}, {}), "onednn_add");
  EXPECT_EQ(PlannedKernel("add", {{4, 5}, {5}}, {}), "loop_add");  // under kMinElementwiseSize
  EXPECT_EQ(PlannedKernel("sub", {{131}, big}, {}), "loop_sub");   // broadcast first operand
  EXPECT_EQ(PlannedKernel("sigmoid", {big}, {}), "onednn_sigmoid");
  EXPECT_EQ(PlannedKernel("sigmoid", {{7}}, {}), "loop_sigmoid");
  const AttrMap conv = {{"stride", Ints{2, 2}}, {"output_padding", Ints{0, 0}}};
  EXPECT_EQ(PlannedKernel("conv_transpose2d", {{1, 4, 5, 5}, {4, 3, 3, 3}}, conv),
            "onednn_conv_transpose2d");
  // An output_padding of at least the stride has no symmetric-padding form in oneDNN.
  const AttrMap padded = {
      {"stride", Ints{1, 1}}, {"output_padding", Ints{1, 1}}, {"dilation", Ints{2, 2}}};
  EXPECT_EQ(PlannedKernel("conv_transpose2d", {{1, 4, 5, 5}, {4, 3, 3, 3}}, padded),
            "loop_conv_transpose2d");
}

TEST(OneDnn, ClaimsOnlyWhatItReproduces) {
  const std::vector<DType> f1 = {kF32}, f2 = {kF32, kF32};
  for (const char* op : {"sigmoid", "tanh", "silu", "sqrt", "abs", "square", "gelu", "elu",
                         "leaky_relu", "softmax"}) {
    AttrMap a;
    if (std::string(op) == "softmax") a["dim"] = int64_t{0};
    EXPECT_EQ(KernelName(op, f1, a), std::string("onednn_") + op);
    EXPECT_NE(KernelName(op, {DType::kF64}, a), std::string("onednn_") + op);
  }
  for (const char* op : {"add", "sub", "mul", "div"}) {
    EXPECT_EQ(KernelName(op, f2, {}), std::string("onednn_") + op);
    EXPECT_NE(KernelName(op, {DType::kI32, DType::kI32}, {}), std::string("onednn_") + op);
  }
  for (const char* op : {"matmul", "mm", "bmm", "linear", "conv2d"}) {
    EXPECT_EQ(KernelName(op, f2, {}), std::string("onednn_") + op);
  }
  EXPECT_EQ(KernelName("max_pool2d", f1, {{"kernel_size", Ints{2}}}), "onednn_max_pool2d");
  EXPECT_EQ(KernelName("avg_pool2d", f1, {{"kernel_size", Ints{2}}}), "onednn_avg_pool2d");
  EXPECT_EQ(KernelName("layer_norm", f1, {{"normalized_shape", Ints{2}}}), "onednn_layer_norm");
  // Attributes oneDNN's primitives do not express exactly.
  EXPECT_NE(KernelName("add", f2, {{"alpha", 2.0}}), "onednn_add");
  EXPECT_NE(KernelName("sub", f2, {{"alpha", 0.5}}), "onednn_sub");
  EXPECT_NE(KernelName("div", f2, {{"rounding_mode", std::string("floor")}}), "onednn_div");
  EXPECT_NE(KernelName("leaky_relu", f1, {{"negative_slope", 0.0}}), "onednn_leaky_relu");
  EXPECT_NE(KernelName("softmax", f1, {{"dim", int64_t{0}}, {"dtype", std::string("f64")}}),
            "onednn_softmax");
  // NaN semantics (relu, exp, maximum, minimum, amax, amin) or accuracy (log, log_softmax,
  // sum, mean) differ from PyTorch's: never claimed.
  for (const char* op :
       {"relu", "exp", "log", "maximum", "minimum", "amax", "amin", "sum", "mean"}) {
    EXPECT_EQ(KernelName(op, {kF32, kF32}, {}).rfind("onednn_", 0), std::string::npos) << op;
  }
  EXPECT_NE(KernelName("log_softmax", f1, {{"dim", int64_t{0}}}), "onednn_log_softmax");
}

// ---- eltwise ----------------------------------------------------------------------------------

struct UnaryRef {
  std::string op;
  AttrMap attrs;
  std::function<double(double)> f;
  double lo = -6, hi = 6;
};

std::vector<UnaryRef> UnaryRefs() {
  const double s2 = std::sqrt(2.0), k = std::sqrt(2.0 / M_PI);
  return {
      {"sigmoid", {}, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"tanh", {}, [](double x) { return std::tanh(x); }},
      {"silu", {}, [](double x) { return x / (1 + std::exp(-x)); }},
      {"sqrt", {}, [](double x) { return std::sqrt(x); }, 0, 50},
      {"abs", {}, [](double x) { return std::fabs(x); }},
      {"square", {}, [](double x) { return x * x; }},
      {"gelu", {}, [s2](double x) { return 0.5 * x * (1 + std::erf(x / s2)); }},
      {"gelu",
       {{"approximate", std::string("tanh")}},
       [k](double x) { return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x))); }},
      {"elu", {{"alpha", 0.7}}, [](double x) { return x > 0 ? x : 0.7 * (std::exp(x) - 1); }},
      {"leaky_relu", {{"negative_slope", 0.2}}, [](double x) { return x > 0 ? x : 0.2 * x; }},
  };
}

// Runs a call and reports whether it used a oneDNN primitive (the cache saw a lookup).
bool UsedOneDnn(const std::string& op, std::vector<Tensor> in, const AttrMap& attrs) {
  const cpu::onednn::CacheStats before = cpu::onednn::GetCacheStats();
  auto r = RunOp(op, std::move(in), attrs);
  const cpu::onednn::CacheStats after = cpu::onednn::GetCacheStats();
  return r.ok() && after.hits + after.misses > before.hits + before.misses;
}

// Above kMinElementwiseSize elements, so that the calls reach oneDNN.
const Shape kBig = {130, 131};

TEST(OneDnn, EltwiseMatchesReference) {
  uint32_t seed = 1;
  for (const UnaryRef& r : UnaryRefs()) {
    Tensor x = Random(kF32, kBig, seed++, r.lo, r.hi);
    x.data<float>()[0] = NAN;  // NaN stays NaN
    std::vector<double> want;
    for (double v : x.ToDoubles()) want.push_back(r.f(v));
    EXPECT_EQ(KernelName(r.op, {kF32}, r.attrs), "onednn_" + r.op);
    EXPECT_TRUE(UsedOneDnn(r.op, {x}, r.attrs)) << r.op;
    EXPECT_TRUE(AllClose(Run1(r.op, {x}, r.attrs), want, 2e-6, 2e-6)) << r.op;
    EXPECT_TRUE(SameAsLoop(r.op, {x}, r.attrs, 2e-6)) << r.op;
    // Small, 0-d and empty tensors are handed to the loop kernels, with the same results.
    EXPECT_FALSE(UsedOneDnn(r.op, {Random(kF32, {7, 33}, 1)}, r.attrs)) << r.op;
    EXPECT_TRUE(AllClose(Run1(r.op, {Values(kF32, {}, {0.5})}, r.attrs), {r.f(0.5)}, 1e-6, 1e-6));
    EXPECT_EQ(Run1(r.op, {Random(kF32, {0, 4}, 1)}, r.attrs).shape(), (Shape{0, 4}));
  }
}

// ---- binary -----------------------------------------------------------------------------------

// out[i] = f(a[bcast(i)], b[bcast(i)]) with NumPy broadcasting, by index arithmetic.
std::vector<double> RefBinary(const Tensor& a, const Tensor& b,
                              const std::function<double(double, double)>& f, Shape* out) {
  const size_t r = std::max(a.rank(), b.rank());
  Shape as(r - a.rank(), 1), bs(r - b.rank(), 1);
  as.insert(as.end(), a.shape().begin(), a.shape().end());
  bs.insert(bs.end(), b.shape().begin(), b.shape().end());
  Shape os(r);
  for (size_t i = 0; i < r; ++i) os[i] = as[i] == 1 ? bs[i] : as[i];
  std::vector<double> av = a.ToDoubles(), bv = b.ToDoubles(), y;
  for (int64_t e = 0; e < NumElements(os); ++e) {
    int64_t rest = e, ia = 0, ib = 0, sa = 1, sb = 1;
    for (int d = static_cast<int>(r) - 1; d >= 0; --d) {
      const int64_t idx = rest % os[d];
      rest /= os[d];
      ia += (as[d] == 1 ? 0 : idx) * sa;
      ib += (bs[d] == 1 ? 0 : idx) * sb;
      sa *= as[d];
      sb *= bs[d];
    }
    y.push_back(static_cast<float>(f(static_cast<float>(av[ia]), static_cast<float>(bv[ib]))));
  }
  *out = os;
  return y;
}

TEST(OneDnn, BinaryMatchesReferenceWithBroadcasting) {
  const std::vector<std::pair<std::string, std::function<double(double, double)>>> ops = {
      {"add", [](double x, double y) { return x + y; }},
      {"sub", [](double x, double y) { return x - y; }},
      {"mul", [](double x, double y) { return x * y; }},
      {"div", [](double x, double y) { return x / y; }}};
  // Sizes above kMinElementwiseSize: same shapes, a broadcast second operand (per column, per
  // row, inner block), a broadcast first operand (swapped for add and mul, looped for sub and
  // div), both broadcast, scalars, and an empty result.
  const std::vector<std::pair<Shape, Shape>> shapes = {{kBig, kBig},
                                                       {kBig, {131}},
                                                       {kBig, {130, 1}},
                                                       {{8, 40, 60}, {40, 1}},
                                                       {{131}, kBig},
                                                       {{130, 1}, {1, 131}},
                                                       {{2, 40, 1, 60}, {40, 1}},
                                                       {{}, {17000}},
                                                       {{17000}, {}},
                                                       {{0, 3}, {3}},
                                                       {{2, 16, 24, 30}, {1, 16, 1, 30}}};
  uint32_t seed = 1;
  for (const auto& [name, f] : ops) {
    for (const auto& [sa, sb] : shapes) {
      Tensor a = Random(kF32, sa, seed++, -3, 3), b = Random(kF32, sb, seed++, 0.5, 3);
      Shape want;
      std::vector<double> ref = RefBinary(a, b, f, &want);
      Tensor y = Run1(name, {a, b});
      ASSERT_TRUE(y.defined());
      EXPECT_EQ(y.shape(), want) << name << " " << ShapeToString(sa) << ShapeToString(sb);
      EXPECT_TRUE(AllClose(y, ref, 1e-6, 1e-6)) << name << ShapeToString(sa) << ShapeToString(sb);
      EXPECT_TRUE(SameAsLoop(name, {a, b}, {}, 0))
          << name << ShapeToString(sa) << ShapeToString(sb);
    }
    EXPECT_TRUE(UsedOneDnn(name, {Random(kF32, kBig, 1), Random(kF32, {131}, 2)}, {})) << name;
    EXPECT_FALSE(UsedOneDnn(name, {Random(kF32, {4, 5}, 1), Random(kF32, {5}, 2)}, {})) << name;
  }
  // A wrapped scalar operand is promoted to f32 and broadcast.
  Tensor x = Random(kF32, kBig, 99);
  std::vector<double> want;
  for (double v : x.ToDoubles()) want.push_back(static_cast<float>(static_cast<float>(v) * 2.5f));
  EXPECT_TRUE(AllClose(Run1("mul", {x, ScalarOperand(2.5)}), want, 0, 0));
  // IEEE special values pass through unchanged.
  std::vector<double> special(NumElements(kBig), 1.0);
  special[1] = -1;
  special[2] = 0;
  special[3] = NAN;
  Tensor q = Run1("div", {Values(kF32, kBig, special), Values(kF32, {1}, {0})});
  EXPECT_TRUE(std::isinf(q.ElementAsDouble(0)) && q.ElementAsDouble(0) > 0);
  EXPECT_TRUE(std::isinf(q.ElementAsDouble(1)) && q.ElementAsDouble(1) < 0);
  EXPECT_TRUE(std::isnan(q.ElementAsDouble(2)) && std::isnan(q.ElementAsDouble(3)));
}

// ---- softmax -------------------------------------------------------------------

TEST(OneDnn, SoftmaxMatchesReference) {
  const Shape s = {20, 30, 40};
  Tensor x = Random(kF32, s, 11, -5, 5);
  const std::vector<double> v = x.ToDoubles();
  const int64_t n = NumElements(s);
  for (int64_t dim : {0, 1, 2, -1}) {
    const int64_t d = (dim + 3) % 3;
    const int64_t stride = d == 2 ? 1 : d == 1 ? s[2] : s[1] * s[2];
    std::vector<double> soft(n);
    for (int64_t e = 0; e < n; ++e) {
      const int64_t base = e - ((e / stride) % s[d]) * stride;
      double mx = -INFINITY, total = 0;
      for (int64_t k = 0; k < s[d]; ++k) mx = std::max(mx, v[base + k * stride]);
      for (int64_t k = 0; k < s[d]; ++k) total += std::exp(v[base + k * stride] - mx);
      soft[e] = std::exp(v[e] - mx) / total;
    }
    AttrMap a = {{"dim", dim}};
    EXPECT_TRUE(UsedOneDnn("softmax", {x}, a));
    EXPECT_TRUE(AllClose(Run1("softmax", {x}, a), soft, 1e-5, 1e-6)) << dim;
    EXPECT_TRUE(SameAsLoop("softmax", {x}, a, 1e-5));
  }
  // Non-finite inputs go to the loop kernel, which keeps PyTorch's NaN rows.
  std::vector<double> values(2 * 9000, 0.5);
  values[1] = NAN;
  values[9001] = INFINITY;
  Tensor bad = Values(kF32, {2, 9000}, values);
  auto fast = RunKernel("softmax", false, {bad}, {{"dim", int64_t{1}}});
  auto slow = RunKernel("softmax", true, {bad}, {{"dim", int64_t{1}}});
  ASSERT_TRUE(fast.ok() && slow.ok());
  for (int64_t i = 0; i < bad.numel(); ++i) {
    const double f = (*fast)[0].ElementAsDouble(i), l = (*slow)[0].ElementAsDouble(i);
    ASSERT_TRUE((std::isnan(f) && std::isnan(l)) || f == l) << i;
  }
  EXPECT_TRUE(std::isnan((*fast)[0].ElementAsDouble(0)));
  // Large but finite logits stay on oneDNN and keep full precision.
  std::vector<double> logits(20000, -1e4);
  logits[0] = 1000;
  logits[1] = 999;
  logits[2] = 998;
  Tensor large = Values(kF32, {1, 20000}, logits);
  EXPECT_TRUE(UsedOneDnn("softmax", {large}, {{"dim", int64_t{1}}}));
  Tensor p = Run1("softmax", {large}, {{"dim", int64_t{1}}});
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  EXPECT_NEAR(p.ElementAsDouble(0), 1 / z, 1e-6);
  EXPECT_NEAR(p.ElementAsDouble(1), std::exp(-1.0) / z, 1e-6);
  EXPECT_NEAR(p.ElementAsDouble(2), std::exp(-2.0) / z, 1e-6);
  EXPECT_EQ(p.ElementAsDouble(3), 0.0);
}

// ---- linear algebra and NN kernels against their loop references ------------------------------

TEST(OneDnn, NnKernelsMatchLoops) {
  Tensor x = Random(kF32, {2, 4, 9, 8}, 1), w = Random(kF32, {6, 2, 3, 3}, 2);
  Tensor b = Random(kF32, {6}, 3);
  AttrMap conv = {{"stride", Ints{2, 1}},
                  {"padding", Ints{1, 2}},
                  {"dilation", Ints{1, 2}},
                  {"groups", int64_t{2}}};
  EXPECT_TRUE(SameAsLoop("conv2d", {x, w, b}, conv, 1e-4));
  auto y = RunOp("conv2d", {x, w, b}, conv);
  ASSERT_TRUE(y.ok());
  Tensor gy = Random(kF32, (*y)[0].shape(), 4);
  AttrMap bi = conv, bw = conv;
  bi["input_size"] = x.shape();
  bw["weight_size"] = w.shape();
  EXPECT_TRUE(SameAsLoop("conv2d_backward_input", {gy, w}, bi, 1e-4));
  EXPECT_TRUE(SameAsLoop("conv2d_backward_weight", {gy, x}, bw, 1e-4));

  for (bool ceil_mode : {false, true}) {
    AttrMap mp = {{"kernel_size", Ints{3}},
                  {"stride", Ints{2}},
                  {"padding", Ints{1}},
                  {"ceil_mode", ceil_mode},
                  {"dilation", Ints{1, 2}}};
    EXPECT_TRUE(SameAsLoop("max_pool2d", {x}, mp));
    auto p = RunOp("max_pool2d", {x}, mp);
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(SameAsLoop("max_pool2d_backward", {Random(kF32, (*p)[0].shape(), 5), x}, mp));
    for (bool include_pad : {false, true}) {
      AttrMap ap = {{"kernel_size", Ints{3, 2}},
                    {"stride", Ints{2}},
                    {"padding", Ints{1}},
                    {"ceil_mode", ceil_mode},
                    {"count_include_pad", include_pad}};
      EXPECT_TRUE(SameAsLoop("avg_pool2d", {x}, ap));
      auto q = RunOp("avg_pool2d", {x}, ap);
      ASSERT_TRUE(q.ok());
      EXPECT_TRUE(SameAsLoop("avg_pool2d_backward", {Random(kF32, (*q)[0].shape(), 6), x}, ap));
    }
  }
  // Ties (as after a relu) route the gradient to the first maximum, like PyTorch.
  Tensor ties = Values(kF32, {1, 1, 4, 4}, std::vector<double>(16, 0.0));
  AttrMap k2 = {{"kernel_size", Ints{2}}};
  EXPECT_TRUE(SameAsLoop("max_pool2d_backward", {Random(kF32, {1, 1, 2, 2}, 7), ties}, k2, 0));

  AttrMap ln = {{"normalized_shape", Ints{8, 8}}, {"eps", 1e-3}};
  Tensor g = Random(kF32, {3, 8, 8}, 8), lx = Random(kF32, {3, 8, 8}, 9, -2, 4);
  Tensor lw = Random(kF32, {8, 8}, 10), lb = Random(kF32, {8, 8}, 11);
  EXPECT_TRUE(SameAsLoop("layer_norm", {lx, lw, lb}, ln, 1e-5));
  EXPECT_TRUE(SameAsLoop("layer_norm", {lx}, ln, 1e-5));
  EXPECT_TRUE(SameAsLoop("layer_norm_backward", {g, lx, lw}, ln, 1e-4));
  EXPECT_TRUE(SameAsLoop("layer_norm_backward", {g, lx}, ln, 1e-4));

  Tensor a = Random(kF32, {3, 1, 20, 30}, 12), m = Random(kF32, {4, 30, 10}, 13);
  EXPECT_TRUE(SameAsLoop("matmul", {a, m}, {}, 1e-5));
  EXPECT_TRUE(SameAsLoop("batch_matmul", {m, Random(kF32, {4, 12, 10}, 14)},
                         {{"transpose_b", true}}, 1e-5));
  EXPECT_TRUE(
      SameAsLoop("linear", {a, Random(kF32, {7, 30}, 15), Random(kF32, {7}, 16)}, {}, 1e-5));
}

// ---- plumbing ---------------------------------------------------------------------------------

// Every buffer oneDNN computes in (reorder targets, the pooling workspace, scratchpads) comes
// from the host pool, so a step run again maps no fresh memory: before, each convolution took
// its blocked copies from oneDNN's own allocator, fresh pages (a fault each) on every call.
TEST(OneDnn, RepeatedStepTouchesNoFreshPages) {
  if (!host_memory::Pooled()) GTEST_SKIP() << "sanitizer build: host memory is malloc'd";
  process_malloc::Configure();  // as the server does: large blocks are not kept by malloc
  // Large enough that activations and their blocked copies are pooled sizes.
  Tensor x = Random(kF32, {4, 32, 32, 32}, 1), w = Random(kF32, {32, 32, 3, 3}, 2);
  const AttrMap conv = {{"padding", Ints{1}}};
  const AttrMap pool = {{"kernel_size", Ints{2}}};
  // A convolution (blocked copies in and out) and max pooling with its gradient (workspace).
  auto step = [&] {
    auto y = RunKernel("conv2d", false, {x, w}, conv);
    ASSERT_TRUE(y.ok()) << y.status();
    auto p = RunKernel("max_pool2d", false, {(*y)[0]}, pool);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE(RunKernel("max_pool2d_backward", false, {(*p)[0], (*y)[0]}, pool).ok());
  };
  step();
  const host_memory::Stats before = host_memory::GetStats();
  rusage start, end;
  getrusage(RUSAGE_SELF, &start);
  for (int i = 0; i < 3; ++i) step();
  getrusage(RUSAGE_SELF, &end);
  const host_memory::Stats after = host_memory::GetStats();
  EXPECT_EQ(after.maps, before.maps);
  EXPECT_GT(after.reuses, before.reuses);
  // With oneDNN's own buffers the three steps took about 790 fresh pages (the blocked copies
  // of 512 KiB activations) at every ISA cap; now 10-25, small blocks of malloc's and the
  // test's own. The convolution's gradients are left out: where oneDNN runs them as GEMMs (at
  // SSE4.1) its GEMM allocates packing buffers of its own.
  EXPECT_LT(end.ru_minflt - start.ru_minflt, 200);
}

// A convolution's operands are reordered into blocked copies that later primitives reuse
// while the tensors are unchanged; a tensor written in place (assign, an optimizer step) is
// reordered again.
TEST(OneDnn, BlockedCopiesFollowInPlaceWrites) {
  Tensor x = Random(kF32, {2, 32, 12, 12}, 3), w = Random(kF32, {32, 32, 3, 3}, 4);
  const Tensor w2 = Random(kF32, {32, 32, 3, 3}, 5), x2 = Random(kF32, {2, 32, 12, 12}, 6);
  const AttrMap conv = {{"padding", Ints{1}}};
  ASSERT_TRUE(UsedOneDnn("conv2d", {x, w}, conv));
  const Tensor first = Run1("conv2d", {x, w}, conv);
  EXPECT_TRUE(AllClose(Run1("conv2d", {x, w}, conv), first, 0, 0)) << "the same operands";
  ASSERT_TRUE(RunOp("assign", {w, w2}).ok());
  EXPECT_TRUE(
      AllClose(Run1("conv2d", {x, w}, conv), Run1("conv2d", {x, w2.Detached()}, conv), 0, 0))
      << "new weights, written in place";
  ASSERT_TRUE(RunOp("assign", {x, x2}).ok());
  const Tensor gy = Random(kF32, {2, 32, 12, 12}, 7);
  const AttrMap weight = {{"padding", Ints{1}}, {"weight_size", Ints{32, 32, 3, 3}}};
  EXPECT_TRUE(AllClose(Run1("conv2d_backward_weight", {gy, x}, weight),
                       Run1("conv2d_backward_weight", {gy, x2}, weight), 0, 0))
      << "a new input, written in place";
}

TEST(OneDnn, PrimitiveCacheReusesPrimitives) {
  Tensor a = Random(kF32, {37, 41}, 1), b = Random(kF32, {41, 43}, 2);
  ASSERT_TRUE(RunOp("matmul", {a, b}).ok());
  const cpu::onednn::CacheStats before = cpu::onednn::GetCacheStats();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(RunOp("matmul", {a, b}).ok());
  const cpu::onednn::CacheStats after = cpu::onednn::GetCacheStats();
  EXPECT_EQ(after.hits - before.hits, 5);
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.size, before.size);
  EXPECT_LE(after.size, after.capacity);
  // A new shape is a new primitive.
  ASSERT_TRUE(RunOp("matmul", {a, Random(kF32, {41, 44}, 3)}).ok());
  EXPECT_EQ(cpu::onednn::GetCacheStats().misses, after.misses + 1);
  cpu::onednn::ClearCache();
  EXPECT_EQ(cpu::onednn::GetCacheStats().size, 0);
  EXPECT_TRUE(AllClose(Run1("matmul", {a, b}), RunKernel("matmul", true, {a, b}, {})->at(0)));
}

TEST(OneDnn, PrimitiveCacheCapacityBoundsItsSize) {
  Tensor a = Random(kF32, {37, 41}, 1);
  cpu::onednn::SetCacheCapacity(2);
  for (int64_t n = 40; n < 45; ++n)
    ASSERT_TRUE(RunOp("matmul", {a, Random(kF32, {41, n}, 4)}).ok());
  EXPECT_EQ(cpu::onednn::GetCacheStats().size, 2);
  EXPECT_EQ(cpu::onednn::GetCacheStats().capacity, 2);
  // Without a cache every call builds its primitive, and still computes the same.
  cpu::onednn::SetCacheCapacity(0);
  EXPECT_EQ(cpu::onednn::GetCacheStats().size, 0);
  Tensor b = Random(kF32, {41, 43}, 2);
  const int64_t misses = cpu::onednn::GetCacheStats().misses;
  EXPECT_TRUE(AllClose(Run1("matmul", {a, b}), RunKernel("matmul", true, {a, b}, {})->at(0)));
  EXPECT_TRUE(AllClose(Run1("matmul", {a, b}), RunKernel("matmul", true, {a, b}, {})->at(0)));
  EXPECT_EQ(cpu::onednn::GetCacheStats().misses, misses + 2);
  EXPECT_EQ(cpu::onednn::GetCacheStats().size, 0);
  cpu::onednn::SetCacheCapacity(cpu::onednn::kDefaultCacheCapacity);
}

TEST(OneDnn, PrimitiveCacheEvictsLeastRecentlyUsed) {
  cpu::onednn::ClearCache();
  // A team of one: no primitive is built again for fewer threads, so a key is one build.
  const cpu::TeamScope one_thread(1);
  // One real primitive under many keys: the factory is cheap, the bookkeeping is what counts.
  dnnl::memory::desc md({4}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  dnnl::eltwise_forward::primitive_desc pd(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_abs,
                                  md, 0.f, 0.f),
      cpu::onednn::Engine());
  const cpu::onednn::CachedPrimitive shared{dnnl::eltwise_forward(pd), pd};
  int built = 0;
  auto get = [&](const std::string& key) {
    return cpu::onednn::GetCachedPrimitive(key, [&] {
      ++built;
      return shared;
    });
  };
  const int64_t capacity = cpu::onednn::GetCacheStats().capacity;
  get("first");
  get("second");
  for (int64_t i = 0; i < capacity - 2; ++i) get(absl::StrCat("k", i));
  EXPECT_EQ(cpu::onednn::GetCacheStats().size, capacity);
  get("first");  // a hit: now the most recently used, "second" the least
  EXPECT_EQ(built, capacity);
  get("one more");
  EXPECT_EQ(cpu::onednn::GetCacheStats().size, capacity);
  get("first");
  EXPECT_EQ(built, capacity + 1);
  get("second");  // evicted: built again
  EXPECT_EQ(built, capacity + 2);
  cpu::onednn::ClearCache();
}

TEST(OneDnn, CachedPrimitivesRunOnAnyThread) {
  // Primitives are created on this thread and then run from others at the same time: each
  // thread brings its own stream and scratchpad.
  Tensor a = Random(kF32, {96, 80}, 1), b = Random(kF32, {80, 72}, 2);
  Tensor x = Random(kF32, {2, 8, 12, 12}, 3), w = Random(kF32, {16, 8, 3, 3}, 4);
  AttrMap pad = {{"padding", Ints{1}}};
  const Tensor mm = Run1("matmul", {a, b});
  const Tensor conv = Run1("conv2d", {x, w}, pad);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        auto m = RunOp("matmul", {a, b});
        auto c = RunOp("conv2d", {x, w}, pad);
        if (!m.ok() || !c.ok() || !AllClose((*m)[0], mm, 1e-6, 1e-6) ||
            !AllClose((*c)[0], conv, 1e-6, 1e-6)) {
          ++mismatches;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(OneDnn, ErrorsBecomeStatuses) {
  absl::Status oom = cpu::onednn::Guard("matmul", []() -> absl::Status {
    throw dnnl::error(dnnl_out_of_memory, "could not allocate");
  });
  EXPECT_EQ(GetReason(oom), Reason::kOutOfMemory);
  EXPECT_EQ(GetMetadata(oom)["op"], "matmul");
  absl::Status bad = cpu::onednn::Guard("conv2d", []() -> absl::Status {
    // A descriptor oneDNN rejects: mismatched ranks.
    dnnl::memory::desc a({2, 3}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
    dnnl::memory::desc c({2, 3, 4}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::abc);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, a, c), cpu::onednn::Engine());
    return absl::OkStatus();
  });
  EXPECT_EQ(GetReason(bad), Reason::kInternal);
  EXPECT_NE(bad.message().find("conv2d"), absl::string_view::npos) << bad;
}

}  // namespace
}  // namespace tensord
