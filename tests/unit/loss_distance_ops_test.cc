// smooth_l1_loss, huber_loss, kl_div and cosine_similarity against hand-written references:
// smooth_l1_loss and huber_loss for several beta/delta (both sides of the kink), kl_div with and
// without log targets under every reduction incl. batchmean, cosine_similarity over dims with
// broadcasting and the eps floor; dtypes, promotion, empty inputs and the error cases with their
// reasons.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> Reduce(const std::vector<double>& l, const std::string& reduction,
                           double batch = 1) {
  if (reduction == "none") return l;
  double s = 0;
  for (double v : l) s += v;
  if (reduction == "sum") return {s};
  if (reduction == "batchmean") return {s / batch};
  return {s / static_cast<double>(l.size())};
}

// Runs `op` under each reduction and compares with the per-element reference.
void ExpectLoss(const std::string& op, const std::vector<Tensor>& in, AttrMap attrs,
                const std::vector<double>& per_element, const Shape& none_shape,
                std::vector<std::string> reductions = {"none", "mean", "sum"}, double batch = 1) {
  for (const std::string& reduction : reductions) {
    SCOPED_TRACE(op + " reduction=" + reduction);
    attrs["reduction"] = reduction;
    Tensor out = Run1(op, in, attrs);
    ASSERT_TRUE(out.defined());
    EXPECT_EQ(out.dtype(), in[0].dtype());
    EXPECT_EQ(out.shape(), reduction == "none" ? none_shape : Shape{});
    EXPECT_TRUE(AllClose(out, Reduce(per_element, reduction, batch), 1e-5, 1e-6));
  }
}

// input [3, 4] against a target [4] broadcast over the rows.
struct Pair {
  Tensor x, t;
  std::vector<double> diff;  // x - t, broadcast
};
Pair MakePair(DType dt, uint32_t seed) {
  Pair p{Random(dt, {3, 4}, seed, -3, 3), Random(dt, {4}, seed + 1, -3, 3), {}};
  std::vector<double> xv = p.x.ToDoubles(), tv = p.t.ToDoubles();
  for (int i = 0; i < 12; ++i) p.diff.push_back(xv[i] - tv[i % 4]);
  return p;
}

TEST(LossDistance, SmoothL1MatchesReference) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    Pair p = MakePair(dt, 1);
    for (double beta : {1.0, 0.5, 2.5, 0.0}) {
      SCOPED_TRACE("beta " + std::to_string(beta));
      std::vector<double> l;
      for (double d : p.diff) {
        const double z = std::fabs(d);
        l.push_back(z < beta ? 0.5 * z * z / beta : z - 0.5 * beta);
      }
      ExpectLoss("smooth_l1_loss", {p.x, p.t}, {{"beta", beta}}, l, {3, 4});
    }
    std::vector<double> l;
    for (double d : p.diff) l.push_back(std::fabs(d) < 1 ? 0.5 * d * d : std::fabs(d) - 0.5);
    EXPECT_TRUE(AllClose(Run1("smooth_l1_loss", {p.x, p.t}), Reduce(l, "mean")));  // defaults
  }
}

TEST(LossDistance, HuberMatchesReference) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    Pair p = MakePair(dt, 3);
    for (double delta : {1.0, 0.3, 2.5}) {
      SCOPED_TRACE("delta " + std::to_string(delta));
      std::vector<double> l;
      for (double d : p.diff) {
        const double z = std::fabs(d);
        l.push_back(z < delta ? 0.5 * z * z : delta * (z - 0.5 * delta));
      }
      ExpectLoss("huber_loss", {p.x, p.t}, {{"delta", delta}}, l, {3, 4});
    }
  }
  // huber = delta * smooth_l1(beta = delta).
  Tensor x = Random(DType::kF64, {10}, 5, -4, 4), t = Random(DType::kF64, {10}, 6, -4, 4);
  Tensor h = Run1("huber_loss", {x, t}, {{"delta", 2.0}, {"reduction", std::string("none")}});
  Tensor s = Run1("smooth_l1_loss", {x, t}, {{"beta", 2.0}, {"reduction", std::string("none")}});
  std::vector<double> scaled = s.ToDoubles();
  for (double& v : scaled) v *= 2;
  EXPECT_TRUE(AllClose(h, scaled, 1e-12, 1e-12));
}

TEST(LossDistance, PointwiseLossesPromoteAndHandleEmpty) {
  Tensor x = Values(DType::kF64, {3}, {0, 2, -1});
  Tensor ti = Values(DType::kI64, {3}, {0, 0, 1});
  Tensor out = Run1("huber_loss", {x, ti}, {{"reduction", std::string("none")}});
  EXPECT_EQ(out.dtype(), DType::kF64);
  EXPECT_TRUE(AllClose(out, {0, 1.5, 1.5}));
  Tensor e = Random(DType::kF32, {0, 2}, 1);
  for (const std::string op : {"smooth_l1_loss", "huber_loss"}) {
    EXPECT_TRUE(AllClose(Run1(op, {e, e}), {kNaN})) << op;
    EXPECT_TRUE(AllClose(Run1(op, {e, e}, {{"reduction", std::string("sum")}}), {0})) << op;
  }
}

TEST(LossDistance, PointwiseLossErrors) {
  Tensor x = Random(DType::kF32, {2, 3}, 1);
  auto neg_beta = RunOp("smooth_l1_loss", {x, x}, {{"beta", -0.5}});
  ASSERT_FALSE(neg_beta.ok());
  EXPECT_EQ(GetReason(neg_beta.status()), Reason::kBadAttribute);
  EXPECT_EQ(GetMetadata(neg_beta.status()).at("attribute"), "beta");
  for (double delta : {0.0, -1.0}) {
    auto bad = RunOp("huber_loss", {x, x}, {{"delta", delta}});
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(GetReason(bad.status()), Reason::kBadAttribute);
    EXPECT_EQ(GetMetadata(bad.status()).at("attribute"), "delta");
  }
  Tensor y = Random(DType::kF32, {4}, 2);
  for (const std::string op : {"smooth_l1_loss", "huber_loss", "kl_div"}) {
    auto mismatch = RunOp(op, {x, y});
    ASSERT_FALSE(mismatch.ok()) << op;
    EXPECT_EQ(GetReason(mismatch.status()), Reason::kShapeMismatch) << op;
    EXPECT_EQ(GetMetadata(mismatch.status()).at("op"), op);
    EXPECT_EQ(GetReason(RunOp(op, {x, x}, {{"reduction", std::string("avg")}}).status()),
              Reason::kBadAttribute);
    Tensor i = Random(DType::kI32, {2, 3}, 3, -3, 3);
    EXPECT_EQ(GetReason(RunOp(op, {i, i}).status()), Reason::kDtypeMismatch) << op;
  }
  // batchmean is kl_div's alone.
  EXPECT_EQ(
      GetReason(RunOp("huber_loss", {x, x}, {{"reduction", std::string("batchmean")}}).status()),
      Reason::kBadAttribute);
}

TEST(LossDistance, KlDivMatchesReference) {
  const std::vector<std::string> all = {"none", "mean", "sum", "batchmean"};
  for (DType dt : {DType::kF32, DType::kF64}) {
    Tensor logp = Random(dt, {4, 5}, 7, -3, -0.1);
    std::vector<double> target = Random(DType::kF64, {4, 5}, 8, 0, 1).ToDoubles();
    target[3] = 0;  // a zero target contributes 0 (xlogy), not NaN
    Tensor t = Values(dt, {4, 5}, target);
    std::vector<double> xv = logp.ToDoubles(), tv = t.ToDoubles(), l, ll;
    for (int i = 0; i < 20; ++i) {
      l.push_back(tv[i] == 0 ? 0 : tv[i] * (std::log(tv[i]) - xv[i]));
      ll.push_back(std::exp(tv[i]) * (tv[i] - xv[i]));
    }
    ExpectLoss("kl_div", {logp, t}, {}, l, {4, 5}, all, 4);
    ExpectLoss("kl_div", {logp, t}, {{"log_target", true}}, ll, {4, 5}, all, 4);
    EXPECT_TRUE(AllClose(Run1("kl_div", {logp, t}), Reduce(l, "mean")));  // default: mean
  }
}

TEST(LossDistance, KlDivBroadcastsPromotesAndRefusesIntegers) {
  Tensor x = Values(DType::kF32, {2, 2}, {-1, -2, -0.5, -1.5});
  Tensor t = Values(DType::kF64, {2}, {0.25, 0.75});
  Tensor out = Run1("kl_div", {x, t}, {{"reduction", std::string("none")}});
  EXPECT_EQ(out.dtype(), DType::kF64);  // the common float dtype, as torch.kl_div
  EXPECT_EQ(out.shape(), (Shape{2, 2}));
  std::vector<double> want;
  const double xs[] = {-1, -2, -0.5, -1.5}, ts[] = {0.25, 0.75};
  for (int i = 0; i < 4; ++i) want.push_back(ts[i % 2] * (std::log(ts[i % 2]) - xs[i]));
  EXPECT_TRUE(AllClose(out, want));
  // batchmean divides by the input's first dim; a 0-d input is one sample.
  Tensor x0 = Values(DType::kF64, {}, {-1}), t0 = Values(DType::kF64, {}, {0.5});
  EXPECT_TRUE(AllClose(Run1("kl_div", {x0, t0}, {{"reduction", std::string("batchmean")}}),
                       {0.5 * (std::log(0.5) + 1)}));
  Tensor e = Random(DType::kF32, {0, 3}, 1);
  EXPECT_TRUE(AllClose(Run1("kl_div", {e, e}, {{"reduction", std::string("batchmean")}}), {kNaN}));
  auto int_target = RunOp("kl_div", {x, Values(DType::kI64, {2}, {0, 1})});
  ASSERT_FALSE(int_target.ok());
  EXPECT_EQ(GetReason(int_target.status()), Reason::kDtypeMismatch);
  EXPECT_NE(int_target.status().message().find("target must be floating point"), std::string::npos);
  EXPECT_EQ(GetReason(RunOp("kl_div", {x, Values(DType::kBool, {2}, {0, 1})}).status()),
            Reason::kDtypeMismatch);
}

// Reference cosine similarity of `a` and `b` (already of one shape [outer, n, inner]) over
// the middle axis, with each norm floored at eps.
std::vector<double> RefCosine(const std::vector<double>& a, const std::vector<double>& b,
                              int64_t outer, int64_t n, int64_t inner, double eps) {
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      double dot = 0, na = 0, nb = 0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t i = (o * n + k) * inner + j;
        dot += a[i] * b[i];
        na += a[i] * a[i];
        nb += b[i] * b[i];
      }
      out.push_back(dot / (std::max(std::sqrt(na), eps) * std::max(std::sqrt(nb), eps)));
    }
  }
  return out;
}

TEST(LossDistance, CosineSimilarityOverDims) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    Tensor a = Random(dt, {2, 3, 4}, 11), b = Random(dt, {2, 3, 4}, 12);
    std::vector<double> av = a.ToDoubles(), bv = b.ToDoubles();
    Tensor d1 = Run1("cosine_similarity", {a, b});  // dim = 1
    EXPECT_EQ(d1.dtype(), dt);
    EXPECT_EQ(d1.shape(), (Shape{2, 4}));
    EXPECT_TRUE(AllClose(d1, RefCosine(av, bv, 2, 3, 4, 1e-8)));
    Tensor last = Run1("cosine_similarity", {a, b}, {{"dim", int64_t{-1}}});
    EXPECT_EQ(last.shape(), (Shape{2, 3}));
    EXPECT_TRUE(AllClose(last, RefCosine(av, bv, 6, 4, 1, 1e-8)));
    Tensor first = Run1("cosine_similarity", {a, b}, {{"dim", int64_t{0}}});
    EXPECT_TRUE(AllClose(first, RefCosine(av, bv, 1, 2, 12, 1e-8)));
  }
}

TEST(LossDistance, CosineSimilarityBroadcastsAndFloorsNorms) {
  Tensor a = Random(DType::kF32, {3, 4}, 13);
  Tensor row = Random(DType::kF64, {4}, 14);  // promoted: f64 result
  Tensor out = Run1("cosine_similarity", {a, row}, {{"dim", int64_t{-1}}});
  EXPECT_EQ(out.dtype(), DType::kF64);
  std::vector<double> rv = row.ToDoubles(), tiled;
  for (int i = 0; i < 3; ++i) tiled.insert(tiled.end(), rv.begin(), rv.end());
  EXPECT_TRUE(AllClose(out, RefCosine(a.ToDoubles(), tiled, 3, 4, 1, 1e-8), 1e-6));
  // A zero vector gives 0; a vector shorter than eps is divided by eps.
  Tensor x = Values(DType::kF64, {3, 2}, {0, 0, 1e-9, 0, 3, 4});
  Tensor y = Values(DType::kF64, {3, 2}, {1, 2, 2, 0, 6, 8});
  EXPECT_TRUE(AllClose(Run1("cosine_similarity", {x, y}), {0, 0.1, 1}));
  EXPECT_TRUE(AllClose(Run1("cosine_similarity", {x, y}, {{"eps", 1e-12}}), {0, 1, 1}));
  EXPECT_TRUE(AllClose(Run1("cosine_similarity", {x, y}, {{"eps", 10.0}}), {0, 2e-11, 0.5}));
  // Int operands are cast to the float of the other; empty inputs give empty or zero results.
  Tensor xi = Values(DType::kI32, {1, 2}, {3, 4});
  EXPECT_TRUE(
      AllClose(Run1("cosine_similarity", {xi, Values(DType::kF32, {1, 2}, {4, 3})}), {24.0 / 25}));
  EXPECT_EQ(
      Run1("cosine_similarity", {Random(DType::kF32, {0, 3}, 1), Random(DType::kF32, {0, 3}, 2)})
          .shape(),
      (Shape{0}));
  EXPECT_TRUE(AllClose(
      Run1("cosine_similarity", {Random(DType::kF32, {2, 0}, 1), Random(DType::kF32, {2, 0}, 2)}),
      {0, 0}));
}

TEST(LossDistance, CosineSimilarityErrors) {
  Tensor a = Random(DType::kF32, {2, 3}, 1);
  auto mismatch = RunOp("cosine_similarity", {a, Random(DType::kF32, {2, 4}, 2)});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(GetReason(mismatch.status()), Reason::kShapeMismatch);
  EXPECT_NE(mismatch.status().message().find("do not broadcast"), std::string::npos);
  auto bad_dim = RunOp("cosine_similarity", {a, a}, {{"dim", int64_t{2}}});
  ASSERT_FALSE(bad_dim.ok());
  EXPECT_EQ(GetReason(bad_dim.status()), Reason::kBadAttribute);
  EXPECT_EQ(GetMetadata(bad_dim.status()).at("op"), "cosine_similarity");
  Tensor i = Random(DType::kI64, {2, 3}, 3, -3, 3);
  EXPECT_EQ(GetReason(RunOp("cosine_similarity", {i, i}).status()), Reason::kDtypeMismatch);
  EXPECT_EQ(GetReason(RunOp("cosine_similarity", {a}).status()), Reason::kWrongArity);
}

}  // namespace
}  // namespace tensord
