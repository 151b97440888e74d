// dot, outer, addmm, baddbmm, einsum, trace, diag and diagonal on f32 and f64 against
// references written from each op's definition (index walks; einsum by a naive sum over every
// assignment of its subscripts), plus their shape, attribute and dtype errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>

#include "absl/strings/str_split.h"
#include "tests/unit/shape_test_util.h"

namespace tensord {
namespace {
using namespace testing;
using Ints = std::vector<int64_t>;

const std::vector<DType> kFloats = {DType::kF32, DType::kF64};

double Tol(DType d) { return d == DType::kF32 ? 1e-4 : 1e-10; }

Tensor X(DType d, Shape shape, uint32_t seed) { return Random(d, std::move(shape), seed); }

// out = sum over every subscript assignment of the product of the operands; a subscript of
// size 1 in one operand broadcasts. The equation is explicit and has no ellipsis.
std::vector<double> RefEinsum(const std::string& eq, const std::vector<Tensor>& in,
                              Shape* out_shape) {
  std::vector<std::string> sides = absl::StrSplit(eq, "->");
  std::vector<std::string> terms = absl::StrSplit(sides[0], ',');
  std::map<char, int64_t> size;
  for (size_t i = 0; i < in.size(); ++i) {
    for (size_t d = 0; d < terms[i].size(); ++d) {
      int64_t& s = size[terms[i][d]];
      s = std::max(s, in[i].dim(d));
      if (in[i].dim(d) == 0) s = 0;
    }
  }
  std::string labels;
  Shape all;
  for (const auto& [c, s] : size) {
    labels.push_back(c);
    all.push_back(s);
  }
  out_shape->clear();
  for (char c : sides[1]) out_shape->push_back(size[c]);
  std::vector<double> out(NumElements(*out_shape), 0.0);
  ForEachIndex(all, [&](const Shape& at) {
    auto value = [&](char c) { return at[labels.find(c)]; };
    double p = 1;
    for (size_t i = 0; i < in.size(); ++i) {
      Shape idx;
      for (size_t d = 0; d < terms[i].size(); ++d) {
        idx.push_back(in[i].dim(d) == 1 ? 0 : value(terms[i][d]));
      }
      p *= At(in[i], idx);
    }
    Shape o;
    for (char c : sides[1]) o.push_back(value(c));
    out[FlatIndex(*out_shape, o)] += p;
  });
  return out;
}

TEST(LinalgProductOps, Dot) {
  for (DType d : kFloats) {
    SCOPED_TRACE(DTypeName(d));
    Tensor out = Run1("dot", {Values(d, {3}, {1, 2, 3}), Values(d, {3}, {4, -5, 6})});
    EXPECT_EQ(out.shape(), Shape{});
    EXPECT_TRUE(AllClose(out, {12}));
    EXPECT_TRUE(AllClose(Run1("dot", {X(d, {0}, 1), X(d, {0}, 2)}), {0}));
  }
  Tensor v = X(DType::kF32, {3}, 3);
  EXPECT_EQ(ReasonOf(RunOp("dot", {v, X(DType::kF32, {4}, 4)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("dot", {X(DType::kF32, {3, 1}, 5), v})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("dot", {v, X(DType::kF32, {}, 6)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("dot", {v, X(DType::kF64, {3}, 7)})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("dot", {X(DType::kI64, {3}, 8), X(DType::kI64, {3}, 9)})),
            Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("dot", {v})), Reason::kWrongArity);
}

TEST(LinalgProductOps, Outer) {
  for (DType d : kFloats) {
    SCOPED_TRACE(DTypeName(d));
    Tensor out = Run1("outer", {Values(d, {2}, {1, -2}), Values(d, {3}, {3, 4, 5})});
    EXPECT_EQ(out.shape(), (Shape{2, 3}));
    EXPECT_TRUE(AllClose(out, {3, 4, 5, -6, -8, -10}));
    EXPECT_EQ(Run1("outer", {X(d, {0}, 1), X(d, {3}, 2)}).shape(), (Shape{0, 3}));
  }
  // Operands meet at their result type, as a broadcast multiply does.
  Tensor mixed = Run1("outer", {Values(DType::kF32, {1}, {2}), Values(DType::kF64, {2}, {1, 3})});
  EXPECT_EQ(mixed.dtype(), DType::kF64);
  EXPECT_TRUE(AllClose(mixed, {2, 6}));
  Tensor v = X(DType::kF32, {3}, 3);
  EXPECT_EQ(ReasonOf(RunOp("outer", {X(DType::kF32, {3, 1}, 4), v})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("outer", {v, X(DType::kF32, {}, 5)})), Reason::kShapeMismatch);
}

// beta * c + alpha * (a @ b) per batch entry, c broadcast from the trailing dims.
std::vector<double> RefAddmm(const Tensor& c, const Tensor& a, const Tensor& b, double beta,
                             double alpha) {
  const bool batched = a.rank() == 3;
  const int64_t nb = batched ? a.dim(0) : 1, n = a.dim(a.rank() - 2), k = a.dim(a.rank() - 1),
                m = b.dim(b.rank() - 1);
  const Shape out = batched ? Shape{nb, n, m} : Shape{n, m};
  return Expected(out, [&](const Shape& i) {
    const int64_t bi = batched ? i[0] : 0, r = i[out.size() - 2], col = i[out.size() - 1];
    double acc = 0;
    for (int64_t q = 0; q < k; ++q) {
      acc += (batched ? At(a, {bi, r, q}) * At(b, {bi, q, col}) : At(a, {r, q}) * At(b, {q, col}));
    }
    Shape ci;
    for (int64_t d = 0; d < c.rank(); ++d) {
      const int64_t id = i[out.size() - c.rank() + d];
      ci.push_back(c.dim(d) == 1 ? 0 : id);
    }
    return beta * At(c, ci) + alpha * acc;
  });
}

TEST(LinalgProductOps, AddmmAndBaddbmm) {
  for (DType d : kFloats) {
    SCOPED_TRACE(DTypeName(d));
    Tensor a = X(d, {3, 2}, 1), b = X(d, {2, 4}, 2);
    for (const Shape& cs : {Shape{3, 4}, Shape{4}, Shape{3, 1}, Shape{}}) {
      Tensor c = X(d, cs, 3);
      EXPECT_TRUE(AllClose(Run1("addmm", {c, a, b}), RefAddmm(c, a, b, 1, 1), Tol(d), Tol(d)));
      EXPECT_TRUE(AllClose(Run1("addmm", {c, a, b}, {{"beta", 0.5}, {"alpha", -2.0}}),
                           RefAddmm(c, a, b, 0.5, -2), Tol(d), Tol(d)));
    }
    Tensor ba = X(d, {2, 3, 2}, 4), bb = X(d, {2, 2, 4}, 5);
    for (const Shape& cs : {Shape{2, 3, 4}, Shape{3, 4}, Shape{1, 3, 1}}) {
      Tensor c = X(d, cs, 6);
      EXPECT_TRUE(
          AllClose(Run1("baddbmm", {c, ba, bb}), RefAddmm(c, ba, bb, 1, 1), Tol(d), Tol(d)));
      EXPECT_TRUE(AllClose(Run1("baddbmm", {c, ba, bb}, {{"beta", 2.0}, {"alpha", 0.25}}),
                           RefAddmm(c, ba, bb, 2, 0.25), Tol(d), Tol(d)));
    }
    // beta = 0 ignores the input's values: NaN and inf do not reach the result.
    Tensor bad = Values(d, {2}, {NAN, INFINITY});
    Tensor ones = Values(d, {2, 1}, {1, 1}), row = Values(d, {1, 2}, {3, 4});
    EXPECT_TRUE(AllClose(Run1("addmm", {bad, ones, row}, {{"beta", 0.0}}), {3, 4, 3, 4}));
    EXPECT_TRUE(AllClose(Run1("baddbmm", {bad, X(d, {1, 2, 0}, 7), X(d, {1, 0, 2}, 8)},
                              {{"beta", 0.0}, {"alpha", 3.0}}),
                         {0, 0, 0, 0}));
    // Empty inner dim: the product is zeros, the result beta * input.
    Tensor c = X(d, {2, 3}, 9);
    EXPECT_TRUE(AllClose(Run1("addmm", {c, X(d, {2, 0}, 10), X(d, {0, 3}, 11)}, {{"beta", 2.0}}),
                         RefAddmm(c, X(d, {2, 0}, 10), X(d, {0, 3}, 11), 2, 1)));
  }
  const DType f = DType::kF32;
  Tensor a = X(f, {3, 2}, 1), b = X(f, {2, 4}, 2), c = X(f, {3, 4}, 3);
  EXPECT_EQ(ReasonOf(RunOp("addmm", {c, a, X(f, {3, 4}, 4)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("addmm", {c, X(f, {1, 3, 2}, 5), b})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("addmm", {X(f, {5}, 6), a, b})), Reason::kShapeMismatch);
  // The input may not grow the output.
  EXPECT_EQ(ReasonOf(RunOp("addmm", {X(f, {2, 3, 4}, 7), a, b})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("addmm", {X(DType::kF64, {3, 4}, 8), a, b})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("addmm", {c, a, b}, {{"beta", std::string("x")}})),
            Reason::kBadAttribute);
  Tensor b1 = X(f, {2, 3, 2}, 9);
  EXPECT_EQ(ReasonOf(RunOp("baddbmm", {c, b1, X(f, {1, 2, 4}, 10)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("baddbmm", {c, b1, X(f, {2, 3, 4}, 11)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("baddbmm", {c, a, b})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("baddbmm", {X(f, {3, 3, 4}, 12), b1, X(f, {2, 2, 4}, 13)})),
            Reason::kShapeMismatch);
}

// bf16: 1.0078125^2 = 1.01568603515625 rounds to 1.015625 in bf16; adding -1.0078125 to the
// rounded product would give 0.0078125, while one rounding of the f32 result keeps the exact
// 0.00787353515625 (= 2^-7 * 1.0078125, a bf16 value), as PyTorch's f32 accumulation does.
TEST(LinalgProductOps, MultiStepOpsRoundOnceInBf16) {
  auto bf16 = [](double v) {
    return Run1("to_dtype", {Values(DType::kF32, {1, 1}, {v})}, {{"dtype", std::string("bf16")}});
  };
  auto f32 = [](const Tensor& t) { return Run1("to_dtype", {t}, {{"dtype", std::string("f32")}}); };
  Tensor c = bf16(-1.0078125), a = bf16(1.0078125);
  Tensor out = Run1("addmm", {c, a, a});
  EXPECT_EQ(out.dtype(), DType::kBF16);
  EXPECT_TRUE(SameValues(f32(out), {1, 1}, {0.00787353515625}));
  Tensor batched = Run1("baddbmm", {c, Run1("reshape", {a}, {{"shape", Ints{1, 1, 1}}}),
                                    Run1("reshape", {a}, {{"shape", Ints{1, 1, 1}}})});
  EXPECT_TRUE(SameValues(f32(batched), {1, 1, 1}, {0.00787353515625}));
  // einsum multiplies the first two vectors, then contracts with the third: the same sum.
  auto vec = [](double x, double y) {
    return Run1("to_dtype", {Values(DType::kF32, {2}, {x, y})}, {{"dtype", std::string("bf16")}});
  };
  Tensor e = Run1("einsum", {vec(1.0078125, 1), vec(1.0078125, 1), vec(1, -1.0078125)},
                  {{"equation", std::string("i,i,i->")}});
  EXPECT_EQ(e.dtype(), DType::kBF16);
  EXPECT_TRUE(SameValues(f32(e), {}, {0.00787353515625}));
}

TEST(LinalgProductOps, Trace) {
  for (DType d : kFloats) {
    SCOPED_TRACE(DTypeName(d));
    Tensor m = Values(d, {2, 3}, {1, 2, 3, 4, 5, 6});
    Tensor t = Run1("trace", {m});
    EXPECT_EQ(t.shape(), Shape{});
    EXPECT_TRUE(AllClose(t, {6}));
    EXPECT_TRUE(AllClose(Run1("trace", {Values(d, {3, 2}, {1, 2, 3, 4, 5, 6})}), {5}));
    EXPECT_TRUE(AllClose(Run1("trace", {X(d, {0, 3}, 1)}), {0}));
  }
  EXPECT_EQ(ReasonOf(RunOp("trace", {X(DType::kF32, {2, 2, 2}, 2)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("trace", {X(DType::kF32, {4}, 3)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("trace", {X(DType::kI64, {2, 2}, 4)})), Reason::kDtypeMismatch);
}

// torch.diagonal from its definition: out[rest..., i] = x[... row i (+ offset) ...].
std::vector<double> RefDiagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2,
                                Shape* out) {
  const int64_t r = x.rank();
  dim1 = dim1 < 0 ? dim1 + r : dim1;
  dim2 = dim2 < 0 ? dim2 + r : dim2;
  const int64_t rows = x.dim(dim1), cols = x.dim(dim2);
  int64_t len = 0;
  while ((offset >= 0 ? len < rows && len + offset < cols : len - offset < rows && len < cols)) {
    ++len;
  }
  out->clear();
  for (int64_t d = 0; d < r; ++d) {
    if (d != dim1 && d != dim2) out->push_back(x.dim(d));
  }
  out->push_back(len);
  return Expected(*out, [&](const Shape& i) {
    Shape at(r);
    size_t k = 0;
    for (int64_t d = 0; d < r; ++d) {
      if (d != dim1 && d != dim2) at[d] = i[k++];
    }
    at[dim1] = i.back() + (offset < 0 ? -offset : 0);
    at[dim2] = i.back() + (offset > 0 ? offset : 0);
    return At(x, at);
  });
}

TEST(LinalgProductOps, Diagonal) {
  for (DType d : kFloats) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = X(d, {2, 3, 4}, 1);
    struct Case {
      int64_t offset, dim1, dim2;
    };
    for (const Case& c :
         {Case{0, 0, 1}, Case{1, 0, 1}, Case{-1, 1, 2}, Case{2, -1, 0}, Case{-2, 2, -3},
          Case{0, -2, -1}, Case{3, 1, 2}, Case{-3, 1, 2}, Case{4, 1, 2}, Case{-9, 0, 2}}) {
      SCOPED_TRACE(::testing::Message() << c.offset << " " << c.dim1 << " " << c.dim2);
      Shape shape;
      std::vector<double> want = RefDiagonal(x, c.offset, c.dim1, c.dim2, &shape);
      EXPECT_TRUE(SameValues(
          Run1("diagonal", {x}, {{"offset", c.offset}, {"dim1", c.dim1}, {"dim2", c.dim2}}), shape,
          want));
    }
    Tensor m = Values(d, {2, 3}, {1, 2, 3, 4, 5, 6});
    EXPECT_TRUE(SameValues(Run1("diagonal", {m}), {2}, {1, 5}));
    EXPECT_TRUE(SameValues(Run1("diagonal", {m}, {{"offset", int64_t{INT64_MAX}}}), {0}, {}));
    EXPECT_TRUE(SameValues(Run1("diagonal", {m}, {{"offset", int64_t{INT64_MIN}}}), {0}, {}));
    EXPECT_TRUE(SameValues(
        Run1("diagonal", {X(d, {0, 3, 2}, 2)}, {{"dim1", int64_t{1}}, {"dim2", int64_t{2}}}),
        {0, 2}, {}));
  }
  Tensor x = X(DType::kF32, {2, 3}, 3);
  EXPECT_EQ(ReasonOf(RunOp("diagonal", {x}, {{"dim1", int64_t{1}}, {"dim2", int64_t{-1}}})),
            Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("diagonal", {x}, {{"dim2", int64_t{2}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("diagonal", {x}, {{"dim1", int64_t{-3}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("diagonal", {X(DType::kF32, {3}, 4)})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("diagonal", {X(DType::kF32, {}, 5)})), Reason::kBadAttribute);
  // The gradient helper writes a diagonal into zeros of the given shape.
  Tensor g = Values(DType::kF32, {2}, {7, 8});
  EXPECT_TRUE(
      SameValues(Run1("diagonal_backward", {g}, {{"shape", Ints{2, 3}}, {"offset", int64_t{1}}}),
                 {2, 3}, {0, 7, 0, 0, 0, 8}));
  EXPECT_TRUE(
      SameValues(Run1("diagonal_backward", {g}, {{"shape", Ints{3, 2}}, {"offset", int64_t{-1}}}),
                 {3, 2}, {0, 0, 7, 0, 0, 8}));
  EXPECT_EQ(ReasonOf(RunOp("diagonal_backward", {g}, {{"shape", Ints{3, 3}}})),
            Reason::kShapeMismatch);
}

TEST(LinalgProductOps, Diag) {
  for (DType d : kFloats) {
    SCOPED_TRACE(DTypeName(d));
    Tensor v = Values(d, {2}, {7, 8});
    EXPECT_TRUE(SameValues(Run1("diag", {v}), {2, 2}, {7, 0, 0, 8}));
    EXPECT_TRUE(SameValues(Run1("diag", {v}, {{"diagonal", int64_t{1}}}), {3, 3},
                           {0, 7, 0, 0, 0, 8, 0, 0, 0}));
    EXPECT_TRUE(SameValues(Run1("diag", {v}, {{"diagonal", int64_t{-2}}}), {4, 4},
                           {0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 8, 0, 0}));
    EXPECT_TRUE(
        SameValues(Run1("diag", {X(d, {0}, 1)}, {{"diagonal", int64_t{2}}}), {2, 2}, {0, 0, 0, 0}));
    Tensor m = Values(d, {2, 3}, {1, 2, 3, 4, 5, 6});
    EXPECT_TRUE(SameValues(Run1("diag", {m}), {2}, {1, 5}));
    EXPECT_TRUE(SameValues(Run1("diag", {m}, {{"diagonal", int64_t{1}}}), {2}, {2, 6}));
    EXPECT_TRUE(SameValues(Run1("diag", {m}, {{"diagonal", int64_t{-1}}}), {1}, {4}));
    EXPECT_TRUE(SameValues(Run1("diag", {m}, {{"diagonal", int64_t{5}}}), {0}, {}));
    EXPECT_TRUE(SameValues(Run1("diag", {m}, {{"diagonal", int64_t{-7}}}), {0}, {}));
  }
  EXPECT_EQ(ReasonOf(RunOp("diag", {X(DType::kF32, {2, 2, 2}, 2)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("diag", {X(DType::kF32, {}, 3)})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("diag", {X(DType::kF32, {2}, 4)}, {{"diagonal", int64_t{INT64_MIN}}})),
            Reason::kLimitExceeded);
  EXPECT_EQ(ReasonOf(RunOp("diag", {X(DType::kF32, {2}, 4)}, {{"diagonal", int64_t{1} << 40}})),
            Reason::kLimitExceeded);
}

TEST(LinalgProductOps, EinsumAgainstNaiveSum) {
  struct Case {
    std::string eq;   // as sent
    std::string ref;  // explicit, without ellipsis, for RefEinsum
    std::vector<Shape> shapes;
  };
  const std::vector<Case> cases = {
      {"ij,jk->ik", "ij,jk->ik", {{3, 4}, {4, 5}}},
      {"ij,jk", "ij,jk->ik", {{3, 4}, {4, 5}}},
      {"bij,bjk->bik", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
      {"b i j , b j k -> b i k", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
      {"bij,bkj->bik", "bij,bkj->bik", {{2, 3, 4}, {2, 5, 4}}},
      {"ij,kj->ki", "ij,kj->ki", {{3, 4}, {5, 4}}},
      {"ii->i", "ii->i", {{3, 3}}},
      {"ii->", "ii->", {{4, 4}}},
      {"ii", "ii->", {{4, 4}}},
      {"iij->j", "iij->j", {{3, 3, 2}}},
      {"iji->ij", "iji->ij", {{2, 3, 2}}},
      {"i,j->ij", "i,j->ij", {{3}, {4}}},
      {"i,i->", "i,i->", {{5}, {5}}},
      {"i,i->i", "i,i->i", {{5}, {5}}},
      {"ij->", "ij->", {{3, 4}}},
      {"ij->j", "ij->j", {{3, 4}}},
      {"ij->ji", "ij->ji", {{3, 4}}},
      {"ba", "ba->ab", {{3, 4}}},
      {"Ab,bA", "Ab,bA->", {{2, 3}, {3, 2}}},
      {"aB", "aB->Ba", {{2, 3}}},
      {"bi,bi->b", "bi,bi->b", {{4, 6}, {4, 6}}},
      {"ij,ij->ij", "ij,ij->ij", {{1, 3}, {2, 3}}},
      {"ij,jk->ik", "ij,jk->ik", {{2, 1}, {3, 4}}},
      {"ijk,ikl,lm->jm", "ijk,ikl,lm->jm", {{2, 3, 4}, {2, 4, 3}, {3, 2}}},
      {"ij,jk,kl->il", "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
      {"bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}},
      {"i,->i", "i,->i", {{3}, {}}},
      {"", "->", {{}}},
      {"ij,jk->ik", "ij,jk->ik", {{2, 0}, {0, 3}}},
      {"ij,jk->ik", "ij,jk->ik", {{0, 2}, {2, 3}}},
      {"...ij,...jk->...ik", "bij,jk->bik", {{2, 3, 4}, {4, 5}}},
      {"...ij,...jk", "bij,bjk->bik", {{2, 3, 4}, {1, 4, 5}}},
      {"...ij->ij", "bij->ij", {{2, 3, 4}}},
      {"i...->...", "ibc->bc", {{2, 3, 4}}},
      {"b...a", "bca->cab", {{3, 4, 2}}},
      {"ij->...", "ij->", {{3, 4}}},
      {"i...j,...->j...", "ij,c->jc", {{3, 2}, {4}}},
  };
  for (DType d : kFloats) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << DTypeName(d) << " " << c.eq);
      std::vector<Tensor> in;
      for (size_t i = 0; i < c.shapes.size(); ++i) in.push_back(X(d, c.shapes[i], 10 + i));
      Shape want_shape;
      std::vector<double> want = RefEinsum(c.ref, in, &want_shape);
      Tensor out = Run1("einsum", in, {{"equation", c.eq}});
      ASSERT_TRUE(out.defined());
      EXPECT_EQ(out.shape(), want_shape);
      EXPECT_EQ(out.dtype(), d);
      EXPECT_TRUE(AllClose(out, want, Tol(d), Tol(d)));
    }
  }
}

TEST(LinalgProductOps, EinsumErrors) {
  const DType f = DType::kF32;
  Tensor m = X(f, {2, 3}, 1), n = X(f, {3, 4}, 2);
  auto reason = [](std::vector<Tensor> in, const std::string& eq) {
    return ReasonOf(RunOp("einsum", std::move(in), {{"equation", eq}}));
  };
  // The equation is parsed before it is matched with the operands.
  for (const char* eq : {"i.j", "i..j", "i....j", "...i...", "ij,jk->i,k", "ij-jk", "ij->->i", "i1",
                         "ij->ii", "ij->k", "ij->...i..."}) {
    EXPECT_EQ(reason({m}, eq), Reason::kBadAttribute) << eq;
  }
  EXPECT_EQ(ReasonOf(RunOp("einsum", {m})), Reason::kBadAttribute);  // equation is required
  EXPECT_EQ(reason({m}, "ij,jk->ik"), Reason::kWrongArity);
  EXPECT_EQ(reason({m, n}, "ij->ij"), Reason::kWrongArity);
  EXPECT_EQ(ReasonOf(RunOp("einsum", {}, {{"equation", std::string("->")}})), Reason::kWrongArity);
  EXPECT_EQ(reason({m}, "ijk->i"), Reason::kShapeMismatch);
  EXPECT_EQ(reason({m}, "i->i"), Reason::kShapeMismatch);
  EXPECT_EQ(reason({m}, "ijk...->i"), Reason::kShapeMismatch);
  EXPECT_EQ(reason({m, X(f, {4, 5}, 3)}, "ij,jk->ik"), Reason::kShapeMismatch);
  EXPECT_EQ(reason({m}, "ii->i"), Reason::kShapeMismatch);
  EXPECT_EQ(reason({X(f, {2, 3, 4}, 4), X(f, {3, 4, 5}, 5)}, "...ij,...jk"),
            Reason::kShapeMismatch);
  EXPECT_EQ(reason({m, X(DType::kF64, {3, 4}, 6)}, "ij,jk"), Reason::kDtypeMismatch);
  EXPECT_EQ(reason({X(DType::kI32, {2, 2}, 7)}, "ij"), Reason::kDtypeMismatch);
}

// A contraction runs as one matrix product: the per-tensor limit below is far under what a
// broadcast product [i, j, k] (or [b, i, j, k]) would need, but above every operand and output.
TEST(LinalgProductOps, EinsumContractsWithMatmulNotABroadcastProduct) {
  auto account = std::make_shared<MemoryAccount>(int64_t{64} << 20);
  account->set_max_charge_bytes(int64_t{1} << 20);
  CallEnv env;
  env.account = account;
  env.no_grad = true;
  const Dispatcher& dispatcher = TestDispatcher();
  struct Case {
    std::string eq;
    std::vector<Shape> shapes;
    Shape out;
  };
  for (const Case& c : {Case{"ij,jk->ik", {{256, 256}, {256, 256}}, {256, 256}},
                        Case{"bij,bjk->bik", {{4, 128, 128}, {4, 128, 128}}, {4, 128, 128}},
                        Case{"bjk,bij->bki", {{4, 128, 128}, {4, 128, 128}}, {4, 128, 128}},
                        Case{"...ij,...jk", {{4, 128, 128}, {128, 128}}, {4, 128, 128}}}) {
    SCOPED_TRACE(c.eq);
    std::vector<Tensor> in;
    for (const Shape& s : c.shapes) in.push_back(X(DType::kF32, s, 1));
    auto out = dispatcher.Call("einsum", in, {{"equation", c.eq}}, env);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), c.out);
  }
  // The same limit stops a broadcast product of that size, so the check has teeth.
  Tensor a = X(DType::kF32, {256, 256, 1}, 2), b = X(DType::kF32, {1, 256, 256}, 3);
  EXPECT_FALSE(dispatcher.Call("mul", {a, b}, {}, env).ok());
}

}  // namespace
}  // namespace tensord
