// Finite-difference gradient checks (f64) of conv1d, conv3d, conv_transpose1d, conv_transpose2d,
// max_pool1d, avg_pool1d and the adaptive pools, with stride, padding, dilation, groups,
// output_padding, ceil_mode, unbatched inputs, and under BALANCED checkpointing.
#include <gtest/gtest.h>

#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

constexpr DType kF64 = DType::kF64;
using Ints = std::vector<int64_t>;

struct ConvCase {
  Shape x, w;
  AttrMap attrs;
  bool bias;
};

GradCheckOptions Balanced() {
  GradCheckOptions o;
  o.checkpointing = Checkpointing::kBalanced;
  return o;
}

void CheckConv(const std::string& op, bool transposed, const std::vector<ConvCase>& cases,
               uint32_t seed) {
  for (const ConvCase& c : cases) {
    std::vector<Tensor> in = {Random(kF64, c.x, seed++), Random(kF64, c.w, seed++)};
    if (c.bias) {
      int64_t groups = 1;
      if (c.attrs.count("groups")) groups = std::get<int64_t>(c.attrs.at("groups"));
      in.push_back(Random(kF64, {transposed ? c.w[1] * groups : c.w[0]}, seed++));
    }
    EXPECT_TRUE(GradCheck(op, in, c.attrs)) << op << " " << ShapeToString(c.x);
  }
}

TEST(ConvNdPoolGrad, Conv1d) {
  CheckConv(
      "conv1d", false,
      {{{2, 2, 7}, {3, 2, 3}, {}, true},
       {{1, 4, 9},
        {4, 2, 2},
        {{"stride", Ints{2}}, {"padding", Ints{1}}, {"dilation", Ints{2}}, {"groups", int64_t{2}}},
        true},
       {{3, 6}, {2, 3, 2}, {{"padding", Ints{2}}}, false}},
      1);
}

TEST(ConvNdPoolGrad, Conv3d) {
  CheckConv("conv3d", false,
            {{{1, 2, 4, 3, 4}, {2, 2, 2, 2, 2}, {}, true},
             {{2, 2, 4, 4, 3},
              {2, 1, 2, 3, 2},
              {{"stride", Ints{2, 1, 1}},
               {"padding", Ints{1, 0, 1}},
               {"dilation", Ints{1, 1, 2}},
               {"groups", int64_t{2}}},
              true},
             {{2, 3, 3, 3}, {2, 2, 2, 2, 2}, {{"padding", Ints{1}}, {"stride", Ints{2}}}, false}},
            20);
}

TEST(ConvNdPoolGrad, ConvTranspose1d) {
  CheckConv("conv_transpose1d", true,
            {{{2, 2, 4}, {2, 3, 3}, {}, true},
             {{1, 4, 5},
              {4, 1, 3},
              {{"stride", Ints{2}},
               {"padding", Ints{1}},
               {"output_padding", Ints{1}},
               {"groups", int64_t{2}}},
              true},
             {{2, 4}, {2, 2, 2}, {{"dilation", Ints{3}}, {"output_padding", Ints{2}}}, false}},
            40);
}

TEST(ConvNdPoolGrad, ConvTranspose2d) {
  CheckConv("conv_transpose2d", true,
            {{{1, 2, 3, 4}, {2, 2, 2, 3}, {}, true},
             {{2, 4, 3, 3},
              {4, 1, 3, 2},
              {{"stride", Ints{2, 1}},
               {"padding", Ints{1, 0}},
               {"output_padding", Ints{1, 0}},
               {"dilation", Ints{1, 2}},
               {"groups", int64_t{2}}},
              true},
             {{2, 3, 3},
              {2, 2, 2, 2},
              {{"dilation", Ints{3}}, {"output_padding", Ints{2, 1}}, {"padding", Ints{1}}},
              false}},
            60);
}

TEST(ConvNdPoolGrad, Pool1d) {
  uint32_t seed = 80;
  const std::vector<AttrMap> max_cases = {
      {{"kernel_size", Ints{2}}},
      {{"kernel_size", Ints{3}}, {"stride", Ints{2}}, {"padding", Ints{1}}, {"ceil_mode", true}},
      {{"kernel_size", Ints{2}}, {"dilation", Ints{2}}, {"stride", Ints{1}}}};
  for (const AttrMap& a : max_cases) {
    // Random values are distinct: finite differences are only meaningful away from ties.
    EXPECT_TRUE(GradCheck("max_pool1d", {Random(kF64, {2, 2, 9}, seed++)}, a));
  }
  EXPECT_TRUE(GradCheck("max_pool1d", {Random(kF64, {3, 8}, seed++)}, {{"kernel_size", Ints{3}}}));
  for (bool include_pad : {true, false}) {
    for (bool ceil_mode : {false, true}) {
      AttrMap a = {{"kernel_size", Ints{3}},
                   {"stride", Ints{2}},
                   {"padding", Ints{1}},
                   {"ceil_mode", ceil_mode},
                   {"count_include_pad", include_pad}};
      EXPECT_TRUE(GradCheck("avg_pool1d", {Random(kF64, {2, 2, 8}, seed++)}, a));
    }
  }
  EXPECT_TRUE(GradCheck("avg_pool1d", {Random(kF64, {2, 7}, seed++)}, {{"kernel_size", Ints{2}}}));
}

TEST(ConvNdPoolGrad, AdaptivePools) {
  uint32_t seed = 100;
  const std::vector<std::pair<Shape, Ints>> cases = {
      {{2, 2, 5, 7}, {3, 4}}, {{1, 2, 6, 6}, {3}}, {{2, 3, 4}, {1, 1}}, {{1, 1, 3, 2}, {4, 3}}};
  for (const auto& [shape, size] : cases) {
    for (const char* op : {"adaptive_avg_pool2d", "adaptive_max_pool2d"}) {
      EXPECT_TRUE(GradCheck(op, {Random(kF64, shape, seed++)}, {{"output_size", size}}))
          << op << " " << ShapeToString(shape);
    }
  }
}

TEST(ConvNdPoolGrad, Balanced) {
  EXPECT_TRUE(GradCheck("conv3d",
                        {Random(kF64, {1, 2, 3, 3, 3}, 120), Random(kF64, {2, 2, 2, 2, 2}, 121),
                         Random(kF64, {2}, 122)},
                        {}, Balanced()));
  EXPECT_TRUE(GradCheck("conv_transpose2d",
                        {Random(kF64, {1, 2, 3, 3}, 123), Random(kF64, {2, 2, 2, 2}, 124)},
                        {{"stride", Ints{2}}, {"output_padding", Ints{1}}}, Balanced()));
  EXPECT_TRUE(GradCheck("conv1d", {Random(kF64, {1, 2, 6}, 125), Random(kF64, {3, 2, 2}, 126)}, {},
                        Balanced()));
  EXPECT_TRUE(GradCheck("adaptive_max_pool2d", {Random(kF64, {1, 2, 5, 5}, 127)},
                        {{"output_size", Ints{2, 3}}}, Balanced()));
  EXPECT_TRUE(GradCheck("avg_pool1d", {Random(kF64, {1, 2, 7}, 128)},
                        {{"kernel_size", Ints{3}}, {"padding", Ints{1}}}, Balanced()));
}

}  // namespace
}  // namespace tensord
