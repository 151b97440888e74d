#include <gtest/gtest.h>

#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

TEST(GradCheck, SeedOps) {
  Tensor a = Random(DType::kF64, {2, 3}, 1);
  Tensor b = Random(DType::kF64, {3}, 2);
  EXPECT_TRUE(GradCheck("add", {a, b}));
  EXPECT_TRUE(GradCheck("add", {a, b}, {{"alpha", 2.5}}));
  EXPECT_TRUE(GradCheck("mul", {a, b}));
  EXPECT_TRUE(GradCheck("sum", {a}, {{"dim", std::vector<int64_t>{1}}}));
  EXPECT_TRUE(GradCheck("sum", {a}, {{"dim", std::vector<int64_t>{0}}, {"keepdim", true}}));
  EXPECT_TRUE(GradCheck("reshape", {a}, {{"shape", std::vector<int64_t>{3, -1}}}));
  EXPECT_TRUE(GradCheck("expand", {b}, {{"size", std::vector<int64_t>{4, 3}}}));
}

}  // namespace
}  // namespace tensord
