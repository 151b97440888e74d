// Finite-difference gradient checks (f64) of batch_norm, group_norm, interpolate and
// scaled_dot_product_attention, also under BALANCED checkpointing (which recomputes the
// normalization and resampling during backward).
#include <gtest/gtest.h>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

constexpr DType kF64 = DType::kF64;
using Ints = std::vector<int64_t>;

GradCheckOptions Wrt(std::vector<int> wrt, bool balanced = false) {
  GradCheckOptions o;
  o.wrt = std::move(wrt);
  if (balanced) o.checkpointing = Checkpointing::kBalanced;
  return o;
}

TEST(NormResampleAttentionGrad, BatchNormTraining) {
  uint32_t seed = 1;
  for (const Shape& shape : {Shape{4, 3}, Shape{2, 3, 4}, Shape{2, 2, 3, 3}}) {
    const int64_t c = shape[1];
    Tensor x = Random(kF64, shape, seed++, -1, 2);
    Tensor w = Random(kF64, {c}, seed++, 0.5, 1.5), b = Random(kF64, {c}, seed++);
    Tensor rm = Random(kF64, {c}, seed++), rv = Random(kF64, {c}, seed++, 0.5, 2);
    // Running statistics are buffers: updated on every evaluation, never differentiated.
    for (bool balanced : {false, true}) {
      EXPECT_TRUE(GradCheck("batch_norm", {x, rm, rv, w, b}, {{"training", true}},
                            Wrt({0, 3, 4}, balanced)))
          << ShapeToString(shape) << " balanced=" << balanced;
    }
    EXPECT_TRUE(GradCheck("batch_norm", {x}, {{"training", true}, {"eps", 1e-3}}))
        << ShapeToString(shape);
  }
}

TEST(NormResampleAttentionGrad, BatchNormEval) {
  Tensor x = Random(kF64, {3, 2, 5}, 20);
  Tensor rm = Random(kF64, {2}, 21), rv = Random(kF64, {2}, 22, 0.5, 2);
  Tensor w = Random(kF64, {2}, 23), b = Random(kF64, {2}, 24);
  EXPECT_TRUE(GradCheck("batch_norm", {x, rm, rv, w, b}, {}, Wrt({0, 3, 4})));
  EXPECT_TRUE(GradCheck("batch_norm", {x, rm, rv}, {}, Wrt({0}, true)));
}

TEST(NormResampleAttentionGrad, GroupNorm) {
  uint32_t seed = 30;
  for (const auto& [shape, groups] :
       std::vector<std::pair<Shape, int64_t>>{{{2, 4, 3}, 2}, {{3, 6}, 3}, {{1, 4, 2, 2}, 1}}) {
    const int64_t c = shape[1];
    Tensor x = Random(kF64, shape, seed++, -1, 2);
    Tensor w = Random(kF64, {c}, seed++), b = Random(kF64, {c}, seed++);
    EXPECT_TRUE(GradCheck("group_norm", {x, w, b}, {{"num_groups", groups}}))
        << ShapeToString(shape);
    EXPECT_TRUE(
        GradCheck("group_norm", {x}, {{"num_groups", groups}, {"eps", 1e-3}}, Wrt({}, true)))
        << ShapeToString(shape);
  }
}

TEST(NormResampleAttentionGrad, Interpolate) {
  const std::vector<std::pair<Shape, AttrMap>> cases = {
      {{1, 2, 3, 4}, {{"size", Ints{5, 7}}, {"mode", std::string("bilinear")}}},
      {{1, 1, 3, 4},
       {{"size", Ints{5, 7}}, {"mode", std::string("bilinear")}, {"align_corners", true}}},
      {{2, 1, 3, 5}, {{"scale_factor", 1.7}, {"mode", std::string("bilinear")}}},
      {{1, 2, 4, 5}, {{"size", Ints{2, 3}}, {"mode", std::string("bilinear")}}},
      {{2, 2, 5}, {{"size", Ints{8}}, {"mode", std::string("linear")}}},
      {{1, 2, 3, 4}, {{"scale_factor", 2.0}, {"mode", std::string("nearest")}}},
      {{1, 1, 5, 4}, {{"size", Ints{3, 7}}}},
      {{1, 1, 2, 3, 2}, {{"scale_factor", 1.5}, {"mode", std::string("trilinear")}}}};
  uint32_t seed = 40;
  for (const auto& [shape, attrs] : cases) {
    Tensor x = Random(kF64, shape, seed++);
    EXPECT_TRUE(GradCheck("interpolate", {x}, attrs)) << ShapeToString(shape);
  }
  EXPECT_TRUE(GradCheck("interpolate", {Random(kF64, {1, 2, 3, 3}, seed++)},
                        {{"size", Ints{4, 5}}, {"mode", std::string("bilinear")}}, Wrt({}, true)));
}

TEST(NormResampleAttentionGrad, Attention) {
  Tensor q = Random(kF64, {2, 3, 4}, 50), k = Random(kF64, {2, 5, 4}, 51),
         v = Random(kF64, {2, 5, 3}, 52);
  EXPECT_TRUE(GradCheck("scaled_dot_product_attention", {q, k, v}));
  EXPECT_TRUE(GradCheck("scaled_dot_product_attention", {q, k, v}, {{"is_causal", true}}));
  Tensor keep = Values(DType::kBool, {3, 5}, {1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1, 0, 0, 0});
  EXPECT_TRUE(GradCheck("scaled_dot_product_attention", {q, k, v, keep}, {{"scale", 0.7}}));
  Tensor bias = Random(kF64, {2, 1, 5}, 53);
  EXPECT_TRUE(GradCheck("scaled_dot_product_attention", {q, k, v, bias}));
  EXPECT_TRUE(GradCheck("scaled_dot_product_attention",
                        {Random(kF64, {2, 2, 3, 4}, 54), Random(kF64, {2, 2, 4, 4}, 55),
                         Random(kF64, {2, 2, 4, 2}, 56)},
                        {{"is_causal", true}}, Wrt({}, true)));
}

}  // namespace
}  // namespace tensord
