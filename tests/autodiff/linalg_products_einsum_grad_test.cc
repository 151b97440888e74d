// Finite-difference gradient checks (f64) for dot, outer, addmm, baddbmm, einsum, trace, diag
// and diagonal, and for diagonal_backward, the internal op diagonal's gradient is written with.
#include <gtest/gtest.h>

#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;
using Ints = std::vector<int64_t>;

Tensor X(Shape shape, uint32_t seed) { return Random(DType::kF64, std::move(shape), seed); }

TEST(LinalgProductGrad, DotAndOuter) {
  EXPECT_TRUE(GradCheck("dot", {X({4}, 1), X({4}, 2)}));
  EXPECT_TRUE(GradCheck("outer", {X({3}, 3), X({4}, 4)}));
  EXPECT_TRUE(GradCheck("outer", {X({1}, 5), X({2}, 6)}));
}

TEST(LinalgProductGrad, AddmmAndBaddbmm) {
  for (const Shape& c : {Shape{3, 4}, Shape{4}, Shape{3, 1}, Shape{}}) {
    EXPECT_TRUE(GradCheck("addmm", {X(c, 1), X({3, 2}, 2), X({2, 4}, 3)}));
    EXPECT_TRUE(GradCheck("addmm", {X(c, 4), X({3, 2}, 5), X({2, 4}, 6)},
                          {{"beta", 0.5}, {"alpha", -1.5}}));
  }
  // beta = 0: the input gets a zero gradient.
  EXPECT_TRUE(GradCheck("addmm", {X({3, 4}, 7), X({3, 2}, 8), X({2, 4}, 9)}, {{"beta", 0.0}}));
  for (const Shape& c : {Shape{2, 3, 4}, Shape{3, 4}, Shape{2, 1, 4}}) {
    EXPECT_TRUE(GradCheck("baddbmm", {X(c, 10), X({2, 3, 2}, 11), X({2, 2, 4}, 12)}));
    EXPECT_TRUE(GradCheck("baddbmm", {X(c, 13), X({2, 3, 2}, 14), X({2, 2, 4}, 15)},
                          {{"beta", 2.0}, {"alpha", 0.5}}));
  }
  EXPECT_TRUE(GradCheck("baddbmm", {X({2, 3, 4}, 16), X({2, 3, 2}, 17), X({2, 2, 4}, 18)},
                        {{"beta", 0.0}, {"alpha", 3.0}}));
}

TEST(LinalgProductGrad, TraceDiagDiagonal) {
  EXPECT_TRUE(GradCheck("trace", {X({3, 3}, 1)}));
  EXPECT_TRUE(GradCheck("trace", {X({2, 4}, 2)}));
  for (int64_t k : {0, 1, -2}) {
    EXPECT_TRUE(GradCheck("diag", {X({3}, 3)}, {{"diagonal", k}})) << k;
    EXPECT_TRUE(GradCheck("diag", {X({3, 4}, 4)}, {{"diagonal", k}})) << k;
  }
  Tensor x = X({2, 3, 4}, 5);
  struct Case {
    int64_t offset, dim1, dim2;
  };
  for (const Case& c : {Case{0, 0, 1}, Case{1, -1, 1}, Case{-1, 2, 0}, Case{2, 1, 2}}) {
    EXPECT_TRUE(
        GradCheck("diagonal", {x}, {{"offset", c.offset}, {"dim1", c.dim1}, {"dim2", c.dim2}}))
        << c.offset << " " << c.dim1 << " " << c.dim2;
  }
}

TEST(LinalgProductGrad, DiagonalBackwardIsDifferentiable) {
  EXPECT_TRUE(GradCheck("diagonal_backward", {X({2, 3}, 1)},
                        {{"shape", Ints{2, 4, 3}},
                         {"offset", int64_t{1}},
                         {"dim1", int64_t{2}},
                         {"dim2", int64_t{-2}}}));
}

TEST(LinalgProductGrad, Einsum) {
  struct Case {
    std::string eq;
    std::vector<Shape> shapes;
  };
  for (const Case& c :
       {Case{"ij,jk->ik", {{3, 4}, {4, 2}}}, Case{"bij,bjk->bik", {{2, 3, 4}, {2, 4, 2}}},
        Case{"ii->i", {{3, 3}}}, Case{"ii->", {{3, 3}}}, Case{"i,j->ij", {{3}, {2}}},
        Case{"ij->", {{2, 3}}}, Case{"ba", {{2, 3}}}, Case{"ij,ij->ij", {{1, 3}, {2, 3}}},
        Case{"ijk,ikl,lm->jm", {{2, 3, 2}, {2, 2, 3}, {3, 2}}},
        Case{"...ij,...jk->...ik", {{2, 3, 2}, {2, 2}}}, Case{"iij->j", {{2, 2, 3}}}}) {
    std::vector<Tensor> in;
    for (size_t i = 0; i < c.shapes.size(); ++i) in.push_back(X(c.shapes[i], 20 + i));
    EXPECT_TRUE(GradCheck("einsum", in, {{"equation", c.eq}})) << c.eq;
  }
}

TEST(LinalgProductGrad, BalancedCheckpointingGivesTheSameGradients) {
  GradCheckOptions balanced;
  balanced.checkpointing = Checkpointing::kBalanced;
  EXPECT_TRUE(GradCheck("einsum", {X({2, 3, 4}, 1), X({2, 4, 2}, 2)},
                        {{"equation", std::string("bij,bjk->bik")}}, balanced));
  EXPECT_TRUE(GradCheck("diagonal", {X({3, 4}, 3)}, {{"offset", int64_t{1}}}, balanced));
  EXPECT_TRUE(GradCheck("addmm", {X({4}, 4), X({3, 2}, 5), X({2, 4}, 6)},
                        {{"beta", 0.5}, {"alpha", 2.0}}, balanced));
}

}  // namespace
}  // namespace tensord
