// Finite-difference gradient checks (f64) for every loss and reduction mode, with respect to
// the input and, where PyTorch differentiates it, the target; some under BALANCED checkpointing.
#include <gtest/gtest.h>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

const std::vector<std::string> kReductions = {"none", "mean", "sum"};

AttrMap With(AttrMap a, const std::string& reduction) {
  a["reduction"] = reduction;
  return a;
}

TEST(LossGrad, MseAndL1) {
  Tensor x = Random(DType::kF64, {3, 4}, 1, -2, 2);
  Tensor t = Random(DType::kF64, {3, 4}, 2, -2, 2);
  Tensor row = Random(DType::kF64, {4}, 3, -2, 2);
  for (const std::string& r : kReductions) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(GradCheck("mse_loss", {x, t}, With({}, r)));
    EXPECT_TRUE(GradCheck("l1_loss", {x, t}, With({}, r)));
    // Broadcast target: its gradient is summed over the broadcast rows.
    EXPECT_TRUE(GradCheck("mse_loss", {x, row}, With({}, r)));
    EXPECT_TRUE(GradCheck("l1_loss", {x, row}, With({}, r)));
  }
}

TEST(LossGrad, BinaryCrossEntropy) {
  Tensor x = Random(DType::kF64, {2, 5}, 4, 0.05, 0.95);
  Tensor t = Random(DType::kF64, {2, 5}, 5, 0, 1);
  Tensor w = Random(DType::kF64, {5}, 6, 0.5, 2);
  for (const std::string& r : kReductions) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(GradCheck("binary_cross_entropy", {x, t}, With({}, r)));
    // The weight multiplies the elementwise loss, so it is differentiable too.
    EXPECT_TRUE(GradCheck("binary_cross_entropy", {x, t, w}, With({}, r)));
  }
}

TEST(LossGrad, BinaryCrossEntropyWithLogits) {
  Tensor x = Random(DType::kF64, {3, 4}, 7, -3, 3);
  Tensor t = Random(DType::kF64, {3, 4}, 8, 0, 1);
  Tensor w = Random(DType::kF64, {3, 1}, 9, 0.5, 2);
  Tensor pw = Random(DType::kF64, {4}, 10, 0.5, 3);
  for (const std::string& r : kReductions) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(GradCheck("binary_cross_entropy_with_logits", {x, t}, With({}, r)));
    // Input, target, weight and pos_weight (their gradients summed over the broadcast).
    EXPECT_TRUE(GradCheck("binary_cross_entropy_with_logits", {x, t, w, pw}, With({}, r)));
  }
}

TEST(LossGrad, CrossEntropyClassIndices) {
  GradCheckOptions input_only;
  input_only.wrt = {0};
  Tensor x2 = Random(DType::kF64, {4, 5}, 11, -2, 2);
  Tensor t2 = Values(DType::kI64, {4}, {1, 4, -100, 0});
  Tensor x3 = Random(DType::kF64, {2, 3, 4}, 12, -2, 2);
  Tensor t3 = Random(DType::kI64, {2, 4}, 13, 0, 3);
  Tensor x1 = Random(DType::kF64, {5}, 14, -2, 2);
  Tensor t1 = Values(DType::kI32, {}, {3});
  Tensor w5 = Random(DType::kF64, {5}, 15, 0.5, 2);
  for (const std::string& r : kReductions) {
    for (double ls : {0.0, 0.25}) {
      SCOPED_TRACE(r + " label_smoothing " + std::to_string(ls));
      AttrMap a = With({{"label_smoothing", ls}}, r);
      EXPECT_TRUE(GradCheck("cross_entropy", {x2, t2}, a));
      EXPECT_TRUE(GradCheck("cross_entropy", {x2, t2, w5}, a, input_only));
      EXPECT_TRUE(GradCheck("cross_entropy", {x3, t3}, a));
      EXPECT_TRUE(GradCheck("cross_entropy", {x1, t1, w5}, a, input_only));
    }
    EXPECT_TRUE(GradCheck("nll_loss", {x2, t2, w5}, With({}, r), input_only));
    EXPECT_TRUE(GradCheck("nll_loss", {x3, t3}, With({{"ignore_index", int64_t{1}}}, r)));
  }
}

TEST(LossGrad, CrossEntropyProbabilityTargets) {
  Tensor x = Random(DType::kF64, {3, 4}, 16, -2, 2);
  Tensor p = Random(DType::kF64, {3, 4}, 17, 0, 1);
  Tensor w = Random(DType::kF64, {4}, 18, 0.5, 2);
  GradCheckOptions no_weight;
  no_weight.wrt = {0, 1};  // input and soft target
  for (const std::string& r : kReductions) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(GradCheck("cross_entropy", {x, p}, With({{"label_smoothing", 0.1}}, r)));
    EXPECT_TRUE(GradCheck("cross_entropy", {x, p, w}, With({}, r), no_weight));
  }
}

TEST(LossGrad, BalancedCheckpointing) {
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  Tensor x = Random(DType::kF64, {4, 3}, 19, -2, 2);
  Tensor t = Values(DType::kI64, {4}, {2, 0, 1, 1});
  EXPECT_TRUE(GradCheck("cross_entropy", {x, t}, {{"label_smoothing", 0.1}}, balanced));
  Tensor y = Random(DType::kF64, {4, 3}, 20, -2, 2);
  EXPECT_TRUE(GradCheck("mse_loss", {x, y}, {}, balanced));
  Tensor p = Random(DType::kF64, {4, 3}, 21, 0, 1);
  EXPECT_TRUE(GradCheck("binary_cross_entropy_with_logits", {x, p}, {}, balanced));
}

}  // namespace
}  // namespace tensord
