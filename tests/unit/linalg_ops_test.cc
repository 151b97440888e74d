// matmul, mm, bmm, linear and batch_matmul against naive references, on f32 (oneDNN) and f64
// (loops), including torch.matmul's 1-d promotions, batch broadcasting and empty operands.
#include <gtest/gtest.h>

#include "server/backends/cpu/kernel_table.h"
#include "server/core/status.h"
#include "server/ops/registry.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

// Reference torch.matmul written from the definition: promote 1-d operands, broadcast batch
// dims by index arithmetic on the output, sum over the inner dim in double.
std::vector<double> RefMatmul(const Tensor& a, const Tensor& b, Shape* out_shape, bool ta = false,
                              bool tb = false) {
  Shape as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  if (ta) std::swap(as[as.size() - 1], as[as.size() - 2]);
  if (tb) std::swap(bs[bs.size() - 1], bs[bs.size() - 2]);
  const int64_t n = as[as.size() - 2], k = as.back(), m = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const size_t r = std::max(ab.size(), bb.size());
  ab.insert(ab.begin(), r - ab.size(), 1);
  bb.insert(bb.begin(), r - bb.size(), 1);
  Shape batch(r);
  for (size_t i = 0; i < r; ++i) batch[i] = std::max(ab[i], bb[i]);
  const std::vector<double> av = a.ToDoubles(), bv = b.ToDoubles();
  std::vector<double> out;
  const int64_t count = NumElements(batch);
  for (int64_t e = 0; e < count; ++e) {
    int64_t rest = e, oa = 0, ob = 0, sa = 1, sb = 1;
    for (int d = static_cast<int>(r) - 1; d >= 0; --d) {
      const int64_t idx = rest % batch[d];
      rest /= batch[d];
      oa += (ab[d] == 1 ? 0 : idx) * sa;
      ob += (bb[d] == 1 ? 0 : idx) * sb;
      sa *= ab[d];
      sb *= bb[d];
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) {
          const double x = ta ? av[oa * n * k + q * n + i] : av[oa * n * k + i * k + q];
          const double y = tb ? bv[ob * k * m + j * k + q] : bv[ob * k * m + q * m + j];
          acc += x * y;
        }
        out.push_back(acc);
      }
    }
  }
  *out_shape = batch;
  if (a.rank() > 1 || ta) out_shape->push_back(n);
  if (b.rank() > 1 || tb) out_shape->push_back(m);
  return out;
}

double Tol(DType d) { return d == DType::kF32 ? 1e-4 : 1e-10; }

class LinalgTest : public ::testing::TestWithParam<DType> {};

TEST_P(LinalgTest, MatmulShapes) {
  const DType dt = GetParam();
  const std::vector<std::pair<Shape, Shape>> cases = {{{3}, {3}},
                                                      {{3}, {3, 4}},
                                                      {{2, 3}, {3}},
                                                      {{2, 3}, {3, 4}},
                                                      {{5, 2, 3}, {3, 4}},
                                                      {{2, 3}, {5, 3, 4}},
                                                      {{2, 1, 2, 3}, {3, 3, 4}},
                                                      {{4}, {2, 4, 3}},
                                                      {{2, 3, 4}, {4}},
                                                      {{0, 3}, {3, 2}},
                                                      {{2, 0}, {0, 3}},
                                                      {{1, 2, 3}, {4, 3, 5}},
                                                      {{33, 17}, {17, 65}},
                                                      {{3, 64, 32}, {3, 32, 48}}};
  uint32_t seed = 1;
  for (const auto& [sa, sb] : cases) {
    Tensor a = Random(dt, sa, seed++), b = Random(dt, sb, seed++);
    Shape want;
    std::vector<double> ref = RefMatmul(a, b, &want);
    Tensor out = Run1("matmul", {a, b});
    ASSERT_TRUE(out.defined());
    EXPECT_EQ(out.shape(), want) << ShapeToString(sa) << " @ " << ShapeToString(sb);
    EXPECT_EQ(out.dtype(), dt);
    EXPECT_TRUE(AllClose(out, ref, Tol(dt), Tol(dt)))
        << ShapeToString(sa) << " @ " << ShapeToString(sb);
  }
}

TEST_P(LinalgTest, MmAndBmm) {
  const DType dt = GetParam();
  Tensor a = Random(dt, {4, 5}, 3), b = Random(dt, {5, 6}, 4);
  Shape s;
  EXPECT_TRUE(AllClose(Run1("mm", {a, b}), RefMatmul(a, b, &s), Tol(dt), Tol(dt)));
  Tensor x = Random(dt, {3, 4, 5}, 5), y = Random(dt, {3, 5, 2}, 6);
  Tensor z = Run1("bmm", {x, y});
  EXPECT_EQ(z.shape(), (Shape{3, 4, 2}));
  EXPECT_TRUE(AllClose(z, RefMatmul(x, y, &s), Tol(dt), Tol(dt)));
}

TEST_P(LinalgTest, BatchMatmulTransposes) {
  const DType dt = GetParam();
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = Random(dt, ta ? Shape{2, 1, 5, 4} : Shape{2, 1, 4, 5}, 7);
      Tensor b = Random(dt, tb ? Shape{3, 6, 5} : Shape{3, 5, 6}, 8);
      Shape want;
      std::vector<double> ref = RefMatmul(a, b, &want, ta, tb);
      Tensor out = Run1("batch_matmul", {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}});
      EXPECT_EQ(out.shape(), (Shape{2, 3, 4, 6}));
      EXPECT_TRUE(AllClose(out, ref, Tol(dt), Tol(dt))) << "ta=" << ta << " tb=" << tb;
    }
  }
}

// y = x W^T + b, from the definition.
std::vector<double> RefLinear(const Tensor& x, const Tensor& w, const Tensor* bias) {
  const int64_t in = x.shape().back();
  const int64_t rows = x.numel() / std::max<int64_t>(in, 1);
  const int64_t out = w.rank() == 2 ? w.dim(0) : 1;
  std::vector<double> xv = x.ToDoubles(), wv = w.ToDoubles(), y;
  std::vector<double> bv = bias ? bias->ToDoubles() : std::vector<double>{};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t q = 0; q < in; ++q) acc += xv[r * in + q] * wv[o * in + q];
      if (bias) acc += bv.size() == 1 ? bv[0] : bv[w.rank() == 2 ? o : r];
      y.push_back(acc);
    }
  }
  return y;
}

TEST_P(LinalgTest, Linear) {
  const DType dt = GetParam();
  Tensor w = Random(dt, {6, 5}, 9), b = Random(dt, {6}, 10);
  for (const Shape& xs : {Shape{5}, Shape{4, 5}, Shape{2, 3, 5}, Shape{0, 5}}) {
    Tensor x = Random(dt, xs, 11);
    Shape want(xs.begin(), xs.end() - 1);
    want.push_back(6);
    Tensor y = Run1("linear", {x, w, b});
    EXPECT_EQ(y.shape(), want);
    EXPECT_TRUE(AllClose(y, RefLinear(x, w, &b), Tol(dt), Tol(dt))) << ShapeToString(xs);
    Tensor y2 = Run1("linear", {x, w});
    EXPECT_TRUE(AllClose(y2, RefLinear(x, w, nullptr), Tol(dt), Tol(dt))) << ShapeToString(xs);
  }
  // A scalar-like bias, a 1-d weight, and a bias broadcast over rows.
  Tensor x = Random(dt, {4, 5}, 12);
  Tensor b1 = Random(dt, {1}, 13);
  EXPECT_TRUE(AllClose(Run1("linear", {x, w, b1}), RefLinear(x, w, &b1), Tol(dt), Tol(dt)));
  Tensor w1 = Random(dt, {5}, 14);
  Tensor y1 = Run1("linear", {x, w1});
  EXPECT_EQ(y1.shape(), (Shape{4}));
  EXPECT_TRUE(AllClose(y1, RefLinear(x, w1, nullptr), Tol(dt), Tol(dt)));
  Tensor b2 = Random(dt, {4, 1}, 15);
  Tensor y2 = Run1("linear", {x, w, b2});
  std::vector<double> ref = RefLinear(x, w, nullptr);
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t o = 0; o < 6; ++o) ref[r * 6 + o] += b2.ElementAsDouble(r);
  }
  EXPECT_TRUE(AllClose(y2, ref, Tol(dt), Tol(dt)));
}

INSTANTIATE_TEST_SUITE_P(Float, LinalgTest, ::testing::Values(DType::kF32, DType::kF64),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST(Linalg, KernelChoice) {
  const auto& t = cpu::KernelTable::Get();
  Attrs none;
  for (const char* name : {"matmul", "mm", "bmm", "linear"}) {
    const std::string op = name;
    const OpDef& def = **OpRegistry::Builtin().Find(op);
    std::vector<DType> f32 = {DType::kF32, DType::kF32}, f64 = {DType::kF64, DType::kF64};
    ASSERT_NE(t.Find(def, f32, &none), nullptr);
    EXPECT_EQ(t.Find(def, f32, &none)->name, "onednn_" + op);
    EXPECT_EQ(t.Find(def, f64, &none)->name, "loop_" + op);
  }
}

TEST(Linalg, InnerDimMismatchNamesBothShapes) {
  auto r = RunOp("matmul", {Random(DType::kF32, {2, 3}, 1), Random(DType::kF32, {4, 5}, 2)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(GetReason(r.status()), Reason::kShapeMismatch);
  EXPECT_NE(r.status().message().find("[2, 3]"), absl::string_view::npos) << r.status();
  EXPECT_NE(r.status().message().find("[4, 5]"), absl::string_view::npos) << r.status();
  EXPECT_EQ(GetMetadata(r.status())["shape"], "[2, 3]");
  EXPECT_EQ(GetMetadata(r.status())["other_shape"], "[4, 5]");

  auto v = RunOp("matmul", {Random(DType::kF64, {3}, 1), Random(DType::kF64, {4}, 2)});
  EXPECT_EQ(GetReason(v.status()), Reason::kShapeMismatch);
  EXPECT_NE(v.status().message().find("[3]"), absl::string_view::npos) << v.status();

  auto l = RunOp("linear", {Random(DType::kF32, {2, 3}, 1), Random(DType::kF32, {4, 5}, 2)});
  EXPECT_EQ(GetReason(l.status()), Reason::kShapeMismatch);
  EXPECT_NE(l.status().message().find("[4, 5]"), absl::string_view::npos) << l.status();
}

TEST(Linalg, RankAndDtypeErrors) {
  Tensor m = Random(DType::kF32, {2, 2}, 1);
  Tensor b3 = Random(DType::kF32, {2, 2, 2}, 2);
  EXPECT_EQ(GetReason(RunOp("mm", {m, b3}).status()), Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("bmm", {m, m}).status()), Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("bmm", {b3, Random(DType::kF32, {3, 2, 2}, 3)}).status()),
            Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("matmul", {Tensor::Scalar<float>(1), m}).status()),
            Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("matmul", {m, Random(DType::kF64, {2, 2}, 4)}).status()),
            Reason::kDtypeMismatch);
  EXPECT_EQ(GetReason(RunOp("matmul", {Random(DType::kI32, {2, 2}, 5, 0, 5),
                                       Random(DType::kI32, {2, 2}, 6, 0, 5)})
                          .status()),
            Reason::kDtypeMismatch);
  EXPECT_EQ(GetReason(RunOp("linear", {m, m, Random(DType::kF32, {3}, 7)}).status()),
            Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("linear", {m}).status()), Reason::kWrongArity);
}

}  // namespace
}  // namespace tensord
