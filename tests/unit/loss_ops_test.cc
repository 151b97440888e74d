// Losses against hand-written references for each reduction mode, with broadcasting, weights,
// ignore_index, label smoothing, probability targets, numerically extreme inputs and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Reduces reference per-element losses like the op would; `denominator` overrides the count
// for mean (weighted cross-entropy).
std::vector<double> Reduce(const std::vector<double>& l, const std::string& reduction,
                           double denominator = -1) {
  if (reduction == "none") return l;
  double s = 0;
  for (double v : l) s += v;
  if (reduction == "sum") return {s};
  return {s / (denominator >= 0 ? denominator : static_cast<double>(l.size()))};
}

const std::vector<std::string> kReductions = {"none", "mean", "sum"};

void ExpectLoss(const std::string& op, const std::vector<Tensor>& in, AttrMap attrs,
                const std::vector<double>& per_element, double denominator = -1,
                double rtol = 1e-5) {
  for (const std::string& reduction : kReductions) {
    SCOPED_TRACE(op + " reduction=" + reduction);
    attrs["reduction"] = reduction;
    Tensor out = Run1(op, in, attrs);
    ASSERT_TRUE(out.defined());
    EXPECT_EQ(out.dtype(), in[0].dtype());
    if (reduction != "none") EXPECT_EQ(out.shape(), Shape{});
    EXPECT_TRUE(AllClose(out, Reduce(per_element, reduction, denominator), rtol, 1e-6));
  }
}

TEST(Loss, MseAndL1WithBroadcasting) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    Tensor x = Random(dt, {3, 4}, 1, -2, 2);
    Tensor t = Random(dt, {4}, 2, -2, 2);
    std::vector<double> xv = x.ToDoubles(), tv = t.ToDoubles(), sq, ab;
    for (int i = 0; i < 12; ++i) {
      const double d = xv[i] - tv[i % 4];
      sq.push_back(d * d);
      ab.push_back(std::fabs(d));
    }
    ExpectLoss("mse_loss", {x, t}, {}, sq);
    ExpectLoss("l1_loss", {x, t}, {}, ab);
    EXPECT_EQ(Run1("l1_loss", {x, t}, {{"reduction", std::string("none")}}).shape(), (Shape{3, 4}));
  }
  // Default reduction is mean; an empty input averages to NaN.
  Tensor e = Random(DType::kF32, {0}, 1);
  EXPECT_TRUE(AllClose(Run1("mse_loss", {e, e}), {kNaN}));
  EXPECT_TRUE(AllClose(Run1("l1_loss", {e, e}, {{"reduction", std::string("sum")}}), {0}));
}

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST(Loss, BinaryCrossEntropy) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    Tensor x = Random(dt, {2, 5}, 3, 0.02, 0.98);
    Tensor t = Random(dt, {2, 5}, 4, 0, 1);
    Tensor w = Random(dt, {5}, 5, 0.5, 2);
    std::vector<double> xv = x.ToDoubles(), tv = t.ToDoubles(), wv = w.ToDoubles(), l, lw;
    for (int i = 0; i < 10; ++i) {
      l.push_back(-(tv[i] * std::log(xv[i]) + (1 - tv[i]) * std::log(1 - xv[i])));
      lw.push_back(l.back() * wv[i % 5]);
    }
    ExpectLoss("binary_cross_entropy", {x, t}, {}, l);
    ExpectLoss("binary_cross_entropy", {x, t, w}, {}, lw);
  }
  // Probabilities of exactly 0 and 1: the logs are clamped at -100.
  Tensor x = Values(DType::kF32, {4}, {0, 1, 0, 1});
  Tensor t = Values(DType::kF32, {4}, {1, 0, 0, 1});
  EXPECT_TRUE(AllClose(Run1("binary_cross_entropy", {x, t}, {{"reduction", std::string("none")}}),
                       {100, 100, 0, 0}));
}

TEST(Loss, BinaryCrossEntropyWithLogits) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    Tensor x = Random(dt, {3, 4}, 6, -4, 4);
    Tensor t = Random(dt, {3, 4}, 7, 0, 1);
    Tensor w = Random(dt, {3, 1}, 8, 0.5, 2);
    Tensor pw = Random(dt, {4}, 9, 0.5, 3);
    std::vector<double> xv = x.ToDoubles(), tv = t.ToDoubles(), wv = w.ToDoubles(),
                        pv = pw.ToDoubles(), l, lw, lp;
    for (int i = 0; i < 12; ++i) {
      const double s = Sigmoid(xv[i]);
      l.push_back(-(tv[i] * std::log(s) + (1 - tv[i]) * std::log(1 - s)));
      lw.push_back(l.back() * wv[i / 4]);
      lp.push_back(-(pv[i % 4] * tv[i] * std::log(s) + (1 - tv[i]) * std::log(1 - s)) * wv[i / 4]);
    }
    ExpectLoss("binary_cross_entropy_with_logits", {x, t}, {}, l);
    ExpectLoss("binary_cross_entropy_with_logits", {x, t, w}, {}, lw);
    ExpectLoss("binary_cross_entropy_with_logits", {x, t, w, pw}, {}, lp);
  }
  // Large logits stay finite (the naive log(sigmoid(x)) would be log(0)).
  Tensor x = Values(DType::kF32, {4}, {100, -100, 100, -100});
  Tensor t = Values(DType::kF32, {4}, {0, 1, 1, 0});
  EXPECT_TRUE(AllClose(
      Run1("binary_cross_entropy_with_logits", {x, t}, {{"reduction", std::string("none")}}),
      {100, 100, 0, 0}));
  // pos_weight without a weight: a scalar 1 in the weight slot.
  Tensor pw = Values(DType::kF32, {4}, {2, 2, 2, 2});
  Tensor one = ScalarOperand(1.0);
  EXPECT_TRUE(AllClose(Run1("binary_cross_entropy_with_logits", {x, t, one, pw},
                            {{"reduction", std::string("none")}}),
                       {100, 200, 0, 0}));
}

// Reference cross-entropy over log-probabilities `logp` laid out [n, c, inner] with integer
// targets [n, inner]: per-element losses and the mean denominator (summed target weights).
struct CeRef {
  std::vector<double> loss;
  double weight_sum = 0;
};
CeRef RefNll(const std::vector<double>& logp, const std::vector<double>& target, int64_t n,
             int64_t c, int64_t inner, const std::vector<double>& w, int64_t ignore, double ls) {
  CeRef r;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t t = static_cast<int64_t>(target[i * inner + j]);
      if (t == ignore) {
        r.loss.push_back(0);
        continue;
      }
      auto lp = [&](int64_t k) { return logp[(i * c + k) * inner + j]; };
      auto wt = [&](int64_t k) { return w.empty() ? 1.0 : w[k]; };
      double smooth = 0;
      for (int64_t k = 0; k < c; ++k) smooth -= wt(k) * lp(k);
      r.loss.push_back(-(1 - ls) * wt(t) * lp(t) + ls / c * smooth);
      r.weight_sum += wt(t);
    }
  }
  return r;
}

// log_softmax over dim 1 of [n, c, inner].
std::vector<double> RefLogSoftmax(const std::vector<double>& x, int64_t n, int64_t c,
                                  int64_t inner) {
  std::vector<double> out(x.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < inner; ++j) {
      double s = 0;
      for (int64_t k = 0; k < c; ++k) s += std::exp(x[(i * c + k) * inner + j]);
      for (int64_t k = 0; k < c; ++k) {
        out[(i * c + k) * inner + j] = x[(i * c + k) * inner + j] - std::log(s);
      }
    }
  }
  return out;
}

Tensor Targets(DType dt, Shape shape, int64_t classes, uint32_t seed) {
  return Random(dt, std::move(shape), seed, 0, static_cast<double>(classes));
}

TEST(Loss, CrossEntropyWithClassIndices) {
  struct Case {
    Shape input;
    int64_t n, c, inner;
  };
  for (const Case& k : std::vector<Case>{{{6, 5}, 6, 5, 1}, {{2, 3, 4}, 2, 3, 4}, {{5}, 1, 5, 1}}) {
    for (DType dt : {DType::kF32, DType::kF64}) {
      for (DType tdt : {DType::kI64, DType::kI32}) {
        SCOPED_TRACE(ShapeToString(k.input));
        Tensor x = Random(dt, k.input, 10, -3, 3);
        Shape tshape;
        if (k.input.size() > 1) tshape = {k.n};
        if (k.input.size() > 2) tshape.push_back(k.inner);
        Tensor t = Targets(tdt, tshape, k.c, 11);
        Tensor w = Random(dt, {k.c}, 12, 0.2, 2);
        std::vector<double> logp = RefLogSoftmax(x.ToDoubles(), k.n, k.c, k.inner);
        for (double ls : {0.0, 0.2}) {
          CeRef plain = RefNll(logp, t.ToDoubles(), k.n, k.c, k.inner, {}, -100, ls);
          ExpectLoss("cross_entropy", {x, t}, {{"label_smoothing", ls}}, plain.loss,
                     plain.weight_sum);
          CeRef weighted = RefNll(logp, t.ToDoubles(), k.n, k.c, k.inner, w.ToDoubles(), -100, ls);
          ExpectLoss("cross_entropy", {x, t, w}, {{"label_smoothing", ls}}, weighted.loss,
                     weighted.weight_sum);
        }
        // nll_loss takes the log-probabilities directly.
        Tensor lp = Values(dt, k.input, logp);
        CeRef nll = RefNll(logp, t.ToDoubles(), k.n, k.c, k.inner, w.ToDoubles(), -100, 0);
        ExpectLoss("nll_loss", {lp, t, w}, {}, nll.loss, nll.weight_sum);
      }
    }
  }
}

TEST(Loss, IgnoreIndexIsSkippedAndLeftOutOfTheMean) {
  Tensor x = Random(DType::kF64, {5, 4}, 13, -2, 2);
  std::vector<double> logp = RefLogSoftmax(x.ToDoubles(), 5, 4, 1);
  Tensor t = Values(DType::kI64, {5}, {1, -100, 3, 0, -100});
  CeRef r = RefNll(logp, t.ToDoubles(), 5, 4, 1, {}, -100, 0.1);
  ASSERT_EQ(r.weight_sum, 3);
  ExpectLoss("cross_entropy", {x, t}, {{"label_smoothing", 0.1}}, r.loss, r.weight_sum);
  // A custom ignore_index that is also a valid class.
  Tensor t2 = Values(DType::kI64, {5}, {1, 2, 3, 2, 0});
  CeRef r2 = RefNll(logp, t2.ToDoubles(), 5, 4, 1, {}, 2, 0);
  ExpectLoss("cross_entropy", {x, t2}, {{"ignore_index", int64_t{2}}}, r2.loss, r2.weight_sum);
  // Every target ignored: mean is 0 / 0.
  Tensor all = Values(DType::kI64, {2}, {-100, -100});
  EXPECT_TRUE(AllClose(Run1("nll_loss", {Random(DType::kF32, {2, 3}, 1), all}), {kNaN}));
}

TEST(Loss, CrossEntropyWithProbabilityTargets) {
  for (Shape shape : {Shape{4, 3}, Shape{2, 3, 2}, Shape{3}}) {
    const int64_t n = shape.size() == 1 ? 1 : shape[0];
    const int64_t c = shape.size() == 1 ? shape[0] : shape[1];
    const int64_t inner = shape.size() > 2 ? shape[2] : 1;
    Tensor x = Random(DType::kF64, shape, 14, -2, 2);
    Tensor p = Random(DType::kF64, shape, 15, 0, 1);
    Tensor w = Random(DType::kF64, {c}, 16, 0.5, 2);
    std::vector<double> logp = RefLogSoftmax(x.ToDoubles(), n, c, inner), pv = p.ToDoubles();
    for (double ls : {0.0, 0.3}) {
      for (bool weighted : {false, true}) {
        std::vector<double> l;
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < inner; ++j) {
            double s = 0;
            for (int64_t k = 0; k < c; ++k) {
              const int64_t e = (i * c + k) * inner + j;
              const double target = pv[e] * (1 - ls) + ls / c;
              s -= logp[e] * target * (weighted ? w.ToDoubles()[k] : 1.0);
            }
            l.push_back(s);
          }
        }
        std::vector<Tensor> in = {x, p};
        if (weighted) in.push_back(w);
        SCOPED_TRACE(ShapeToString(shape));
        // Mean divides by the number of samples, weights or not.
        ExpectLoss("cross_entropy", in, {{"label_smoothing", ls}}, l);
      }
    }
  }
}

TEST(Loss, ErrorsNameTheProblem) {
  Tensor x = Random(DType::kF32, {3, 4}, 1);
  // Class index out of range.
  auto oob = RunOp("cross_entropy", {x, Values(DType::kI64, {3}, {0, 4, 1})});
  ASSERT_FALSE(oob.ok());
  EXPECT_EQ(GetReason(oob.status()), Reason::kIndexOutOfRange);
  EXPECT_NE(oob.status().message().find("target value 4"), std::string::npos) << oob.status();
  EXPECT_NE(oob.status().message().find("4 classes"), std::string::npos) << oob.status();
  EXPECT_EQ(GetMetadata(oob.status()).at("op"), "cross_entropy");
  auto neg = RunOp("nll_loss", {x, Values(DType::kI32, {3}, {0, -1, 1})});
  EXPECT_EQ(GetReason(neg.status()), Reason::kIndexOutOfRange);
  // Target shapes.
  EXPECT_EQ(GetReason(RunOp("cross_entropy", {x, Values(DType::kI64, {4}, {0, 1, 2, 3})}).status()),
            Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("nll_loss", {x, Values(DType::kI64, {3, 1}, {0, 1, 2})}).status()),
            Reason::kShapeMismatch);
  EXPECT_EQ(
      GetReason(RunOp("binary_cross_entropy", {x, Random(DType::kF32, {4}, 2, 0, 1)}).status()),
      Reason::kShapeMismatch);
  EXPECT_EQ(
      GetReason(
          RunOp("binary_cross_entropy_with_logits", {x, Random(DType::kF32, {3}, 2)}).status()),
      Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("mse_loss", {x, Random(DType::kF32, {3}, 2)}).status()),
            Reason::kShapeMismatch);
  // Weight of the wrong size, float class indices, integer inputs.
  Tensor t = Values(DType::kI64, {3}, {0, 1, 2});
  EXPECT_EQ(GetReason(RunOp("cross_entropy", {x, t, Random(DType::kF32, {3}, 3)}).status()),
            Reason::kShapeMismatch);
  EXPECT_EQ(GetReason(RunOp("nll_loss", {x, Values(DType::kF32, {3}, {0, 1, 2})}).status()),
            Reason::kDtypeMismatch);
  EXPECT_EQ(GetReason(RunOp("nll_loss", {x, t, Values(DType::kI64, {4}, {1, 1, 1, 1})}).status()),
            Reason::kDtypeMismatch);
  EXPECT_EQ(
      GetReason(RunOp("cross_entropy", {x, Values(DType::kI64, {3, 4}, std::vector<double>(12, 0))})
                    .status()),
      Reason::kDtypeMismatch);
  EXPECT_EQ(GetReason(RunOp("mse_loss", {t, t}).status()), Reason::kDtypeMismatch);
  // Attributes.
  EXPECT_EQ(GetReason(RunOp("cross_entropy", {x, t}, {{"label_smoothing", 1.5}}).status()),
            Reason::kBadAttribute);
  EXPECT_EQ(GetReason(RunOp("l1_loss", {x, x}, {{"reduction", std::string("avg")}}).status()),
            Reason::kBadAttribute);
  EXPECT_EQ(GetReason(RunOp("cross_entropy", {x, Random(DType::kF32, {3, 4}, 4, 0, 1)},
                            {{"ignore_index", int64_t{1}}})
                          .status()),
            Reason::kBadAttribute);
  // Probabilities outside [0, 1].
  auto bad_p = RunOp("binary_cross_entropy",
                     {Values(DType::kF32, {2}, {0.5, 1.5}), Values(DType::kF32, {2}, {1, 0})});
  ASSERT_FALSE(bad_p.ok());
  EXPECT_NE(bad_p.status().message().find("between 0 and 1"), std::string::npos);
  EXPECT_EQ(GetReason(RunOp("cross_entropy", {Values(DType::kF32, {}, {1}), t}).status()),
            Reason::kShapeMismatch);
}

}  // namespace
}  // namespace tensord
