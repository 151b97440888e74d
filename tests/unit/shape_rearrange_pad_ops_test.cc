// flip, roll, repeat, tile, tril, triu and pad for every dtype they list, against references
// computed from each op's definition by index walks, plus their errors.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/unit/shape_test_util.h"

namespace tensord {
namespace {
using namespace testing;
using Ints = std::vector<int64_t>;

int64_t Mod(int64_t a, int64_t n) { return (a % n + n) % n; }

TEST(ShapeRearrangePadOps, FlipEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = Sample(d, {2, 3, 4}, 1);
    for (const Ints& dims : {Ints{0}, Ints{1, 2}, Ints{-1}, Ints{0, -2, 2}, Ints{}}) {
      auto want = Expected({2, 3, 4}, [&](const Shape& i) {
        Shape j = i;
        for (int64_t dim : dims) {
          const int64_t nd = dim < 0 ? dim + 3 : dim;
          j[nd] = x.dim(nd) - 1 - i[nd];
        }
        return At(x, j);
      });
      EXPECT_TRUE(SameValues(Run1("flip", {x}, {{"dims", dims}}), {2, 3, 4}, want));
    }
    Tensor s = Sample(d, {}, 2);
    EXPECT_TRUE(SameValues(Run1("flip", {s}, {{"dims", Ints{0}}}), {}, s.ToDoubles()));
    EXPECT_TRUE(
        SameValues(Run1("flip", {Sample(d, {0, 3}, 3)}, {{"dims", Ints{0, 1}}}), {0, 3}, {}));
  }
  Tensor x = Sample(DType::kF32, {2, 3}, 1);
  EXPECT_EQ(ReasonOf(RunOp("flip", {x}, {{"dims", Ints{0, -2}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("flip", {x}, {{"dims", Ints{2}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("flip", {x})), Reason::kBadAttribute);  // dims is required
}

TEST(ShapeRearrangePadOps, RollEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = Sample(d, {3, 4}, 4);
    struct Case {
      Ints shifts, dims;
    };
    for (const Case& c : {Case{{1}, {0}}, Case{{-2, 5}, {0, 1}}, Case{{7}, {-1}},
                          Case{{1, 2}, {1, 1}}, Case{{0}, {0}}, Case{{-13}, {1}}}) {
      std::vector<int64_t> shift(2, 0);
      for (size_t k = 0; k < c.dims.size(); ++k) shift[Mod(c.dims[k], 2)] += c.shifts[k];
      auto want = Expected({3, 4}, [&](const Shape& i) {
        return At(x, {Mod(i[0] - shift[0], 3), Mod(i[1] - shift[1], 4)});
      });
      EXPECT_TRUE(
          SameValues(Run1("roll", {x}, {{"shifts", c.shifts}, {"dims", c.dims}}), {3, 4}, want));
    }
    // Without dims the flattened tensor rolls, then takes the input's shape again.
    for (int64_t shift : {int64_t{3}, int64_t{-5}, int64_t{12}, INT64_MIN}) {
      auto want = Expected({3, 4}, [&](const Shape& i) {
        return x.ElementAsDouble(Mod(i[0] * 4 + i[1] - Mod(shift, 12), 12));
      });
      EXPECT_TRUE(SameValues(Run1("roll", {x}, {{"shifts", Ints{shift}}}), {3, 4}, want));
    }
    Tensor s = Sample(d, {}, 5);
    EXPECT_TRUE(SameValues(Run1("roll", {s}, {{"shifts", Ints{3}}}), {}, s.ToDoubles()));
    EXPECT_TRUE(
        SameValues(Run1("roll", {s}, {{"shifts", Ints{3}}, {"dims", Ints{0}}}), {}, s.ToDoubles()));
    EXPECT_TRUE(
        SameValues(Run1("roll", {Sample(d, {0, 2}, 6)}, {{"shifts", Ints{1}}, {"dims", Ints{0}}}),
                   {0, 2}, {}));
  }
  Tensor x = Sample(DType::kF32, {2, 3}, 1);
  EXPECT_EQ(ReasonOf(RunOp("roll", {x}, {{"shifts", Ints{1, 2}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("roll", {x}, {{"shifts", Ints{1}}, {"dims", Ints{0, 1}}})),
            Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("roll", {x}, {{"shifts", Ints{1}}, {"dims", Ints{2}}})),
            Reason::kBadAttribute);
}

// out[i] = x[i mod s] with x read with leading 1s up to the number of counts.
std::vector<double> RepeatReference(const Tensor& x, const Ints& counts, Shape* out) {
  Shape in(counts.size() - x.rank(), 1);
  in.insert(in.end(), x.shape().begin(), x.shape().end());
  out->clear();
  for (size_t d = 0; d < counts.size(); ++d) out->push_back(in[d] * counts[d]);
  return Expected(*out, [&](const Shape& i) {
    int64_t flat = 0;
    for (size_t d = 0; d < i.size(); ++d) flat = flat * in[d] + i[d] % in[d];
    return x.ElementAsDouble(flat);
  });
}

TEST(ShapeRearrangePadOps, RepeatAndTileEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = Sample(d, {2, 3}, 7);
    for (const Ints& r : {Ints{2, 1}, Ints{1, 3}, Ints{2, 2, 1}, Ints{1, 0}, Ints{3, 1, 2, 2}}) {
      Shape out;
      auto want = RepeatReference(x, r, &out);
      EXPECT_TRUE(SameValues(Run1("repeat", {x}, {{"repeats", r}}), out, want));
      EXPECT_TRUE(SameValues(Run1("tile", {x}, {{"dims", r}}), out, want));
    }
    // tile pads short dims with leading 1s; repeat refuses them.
    for (const Ints& r : {Ints{2}, Ints{}}) {
      Shape out;
      Ints full(2 - r.size(), 1);
      full.insert(full.end(), r.begin(), r.end());
      auto want = RepeatReference(x, full, &out);
      EXPECT_TRUE(SameValues(Run1("tile", {x}, {{"dims", r}}), out, want));
      EXPECT_EQ(ReasonOf(RunOp("repeat", {x}, {{"repeats", r}})), Reason::kBadAttribute);
    }
    Tensor s = Sample(d, {}, 8);
    EXPECT_TRUE(SameValues(Run1("repeat", {s}, {{"repeats", Ints{2, 3}}}), {2, 3},
                           std::vector<double>(6, s.ToDoubles()[0])));
    EXPECT_TRUE(SameValues(Run1("tile", {s}, {{"dims", Ints{}}}), {}, s.ToDoubles()));
    EXPECT_TRUE(
        SameValues(Run1("repeat", {Sample(d, {0, 2}, 9)}, {{"repeats", Ints{2, 2}}}), {0, 4}, {}));
  }
  Tensor x = Sample(DType::kF32, {2, 3}, 1);
  EXPECT_EQ(ReasonOf(RunOp("repeat", {x}, {{"repeats", Ints{2, -1}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("tile", {x}, {{"dims", Ints{-1}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("repeat", {x}, {{"repeats", Ints{int64_t{1} << 40, 1 << 30}}})),
            Reason::kLimitExceeded);  // more elements than a tensor may hold
  // An empty tensor may have a huge dim: repeating it must not overflow the dim's size.
  Tensor huge = Values(DType::kF32, {int64_t{1} << 40, 0}, {});
  EXPECT_EQ(ReasonOf(RunOp("repeat", {huge}, {{"repeats", Ints{int64_t{1} << 30, 1}}})),
            Reason::kLimitExceeded);
}

TEST(ShapeRearrangePadOps, TrilTriuEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    for (const Shape& shape : {Shape{4, 5}, Shape{2, 3, 3}, Shape{5, 2}, Shape{0, 3}}) {
      Tensor x = Sample(d, shape, 10);
      for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{-2}, int64_t{7}, INT64_MIN}) {
        for (bool lower : {true, false}) {
          auto want = Expected(shape, [&](const Shape& i) {
            const int64_t r = i[i.size() - 2], c = i[i.size() - 1];
            const bool keep = lower ? c - r <= k : c - r >= k;
            return keep ? At(x, i) : 0.0;
          });
          EXPECT_TRUE(
              SameValues(Run1(lower ? "tril" : "triu", {x}, {{"diagonal", k}}), shape, want))
              << k;
        }
      }
    }
    EXPECT_EQ(ReasonOf(RunOp("tril", {Sample(d, {3}, 1)})), Reason::kShapeMismatch);
    EXPECT_EQ(ReasonOf(RunOp("triu", {Sample(d, {}, 1)})), Reason::kShapeMismatch);
  }
}

// Input position of output position o along a dim of size n, by each mode's definition:
// reflect mirrors and replicate clamps at the input's ends; circular (like torch) first cuts
// negative pads, then wraps the part that is left.
int64_t PadSource(const std::string& mode, int64_t o, int64_t before, int64_t after, int64_t n) {
  if (mode == "circular") {
    const int64_t lo = std::max<int64_t>(-before, 0);
    const int64_t kept = n - lo - std::max<int64_t>(-after, 0);
    return lo + Mod(o - std::max<int64_t>(before, 0), kept);
  }
  const int64_t i = o - before;
  if (i >= 0 && i < n) return i;
  if (mode == "replicate") return i < 0 ? 0 : n - 1;
  if (mode == "reflect") return i < 0 ? -i : 2 * (n - 1) - i;
  return -1;
}

std::vector<double> PadReference(const Tensor& x, const Ints& pad, const std::string& mode,
                                 double value, Shape* out) {
  const int64_t rank = x.rank();
  Ints before(rank, 0), after(rank, 0);
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    before[rank - 1 - k] = pad[2 * k];
    after[rank - 1 - k] = pad[2 * k + 1];
  }
  *out = x.shape();
  for (int64_t d = 0; d < rank; ++d) (*out)[d] += before[d] + after[d];
  return Expected(*out, [&](const Shape& o) {
    Shape i(rank);
    for (int64_t d = 0; d < rank; ++d) {
      i[d] = PadSource(mode, o[d], before[d], after[d], x.dim(d));
      if (i[d] < 0) return value;
    }
    return At(x, i);
  });
}

TEST(ShapeRearrangePadOps, PadModes) {
  // Small cases spelled out (torch.nn.functional.pad of [1, 2, 3, 4] by (2, 1)).
  Tensor row = Values(DType::kF64, {1, 4}, {1, 2, 3, 4});
  const std::map<std::string, std::vector<double>> spelled = {{"constant", {9, 9, 1, 2, 3, 4, 9}},
                                                              {"reflect", {3, 2, 1, 2, 3, 4, 3}},
                                                              {"replicate", {1, 1, 1, 2, 3, 4, 4}},
                                                              {"circular", {3, 4, 1, 2, 3, 4, 1}}};
  for (const auto& [mode, want] : spelled) {
    const double value = mode == "constant" ? 9 : 0;
    EXPECT_TRUE(SameValues(
        Run1("pad", {row}, {{"pad", Ints{2, 1}}, {"mode", mode}, {"value", value}}), {1, 7}, want))
        << mode;
  }
  for (DType d : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(DTypeName(d));
    struct Case {
      Shape shape;
      Ints pad;
      std::string mode;
    };
    // Non-constant modes pad the last k dims of a (k+1)- or (k+2)-d input, like torch.
    for (const Case& c :
         {Case{{2, 3, 4, 5}, {1, 2}, "constant"},
          Case{{2, 3, 4, 5}, {1, 2, 0, 3, 2, 1, 1, 1}, "constant"},
          Case{{2, 3, 4, 5}, {-1, 2, 3, -2}, "constant"}, Case{{2, 3}, {}, "constant"},
          Case{{2, 3, 5}, {3, 4}, "reflect"}, Case{{3, 5}, {-2, 1}, "reflect"},
          Case{{2, 4, 5}, {1, 2, 3, 0}, "reflect"},
          Case{{2, 3, 4, 5}, {2, 0, 1, 2, 1, 1}, "reflect"}, Case{{2, 3, 5}, {4, 7}, "replicate"},
          Case{{2, 1, 4, 5, 3}, {1, 2, 3, 4, 5, 6}, "replicate"},
          Case{{3, 4, 5}, {-1, 2, 4, 1}, "replicate"}, Case{{2, 5}, {5, 5}, "circular"},
          Case{{3, 4, 5}, {-1, 2, 4, 1}, "circular"},
          Case{{2, 3, 4, 5}, {0, 1, 2, 3, 1, 0}, "circular"},
          Case{{2, 2, 6}, {2, -3}, "circular"}}) {
      Tensor x = Sample(d, c.shape, 11);
      const double value = c.mode == "constant" ? -3.5 : 0;
      Shape out;
      auto want = PadReference(x, c.pad, c.mode, value, &out);
      EXPECT_TRUE(SameValues(Run1("pad", {x}, {{"pad", c.pad}, {"mode", c.mode}, {"value", value}}),
                             out, want))
          << c.mode << " " << ShapeToString(c.pad);
    }
    // Constant pads any rank, 0-d and empty inputs included.
    Tensor s = Sample(d, {}, 12);
    EXPECT_TRUE(SameValues(Run1("pad", {s}, {{"pad", Ints{}}}), {}, s.ToDoubles()));
    EXPECT_TRUE(
        SameValues(Run1("pad", {Sample(d, {0}, 1)}, {{"pad", Ints{1, 2}}}), {3}, {0, 0, 0}));
    EXPECT_TRUE(
        SameValues(Run1("pad", {Sample(d, {2, 0}, 1)}, {{"pad", Ints{0, 0, 1, 0}}}), {3, 0}, {}));
  }
}

TEST(ShapeRearrangePadOps, PadErrors) {
  Tensor x = Sample(DType::kF32, {1, 2, 3}, 1);
  auto reason = [&](const Tensor& t, const AttrMap& attrs) {
    return ReasonOf(RunOp("pad", {t}, attrs));
  };
  EXPECT_EQ(reason(x, {{"pad", Ints{1}}}), Reason::kBadAttribute);  // odd length
  EXPECT_EQ(reason(x, {{"pad", Ints{1, 1, 1, 1, 1, 1, 1, 1}}}), Reason::kBadAttribute);
  EXPECT_EQ(reason(x, {{"pad", Ints{-2, -2}}}), Reason::kBadAttribute);  // negative size
  EXPECT_EQ(reason(x, {{"pad", Ints{INT64_MIN, INT64_MAX}}}), Reason::kBadAttribute);
  const int64_t big = int64_t{1} << 59;  // allowed per dim, but the element count overflows
  EXPECT_EQ(reason(x, {{"pad", Ints{big, big, big, big}}}), Reason::kLimitExceeded);
  EXPECT_EQ(reason(x, {{"pad", Ints{1, 1}}, {"mode", std::string("wrap")}}), Reason::kBadAttribute);
  // Reflect padding must be smaller than the dim, as in torch.
  auto out = RunOp("pad", {x}, {{"pad", Ints{3, 0}}, {"mode", std::string("reflect")}});
  EXPECT_EQ(ReasonOf(out), Reason::kBadAttribute);
  EXPECT_EQ(GetMetadata(out.status())["attribute"], "pad");
  EXPECT_TRUE(RunOp("pad", {x}, {{"pad", Ints{0, 2}}, {"mode", std::string("reflect")}}).ok());
  EXPECT_EQ(reason(x, {{"pad", Ints{0, 3}}, {"mode", std::string("reflect")}}),
            Reason::kBadAttribute);
  EXPECT_TRUE(RunOp("pad", {x}, {{"pad", Ints{3, 3}}, {"mode", std::string("circular")}}).ok());
  EXPECT_EQ(reason(x, {{"pad", Ints{4, 0}}, {"mode", std::string("circular")}}),
            Reason::kBadAttribute);
  // After cutting one element, two are left: a pad of 3 would wrap around twice.
  EXPECT_EQ(reason(x, {{"pad", Ints{-1, 3}}, {"mode", std::string("circular")}}),
            Reason::kBadAttribute);
  EXPECT_EQ(reason(Sample(DType::kF32, {1, 0}, 1),
                   {{"pad", Ints{1, 1}}, {"mode", std::string("replicate")}}),
            Reason::kBadAttribute);
  // Non-constant modes: the last 1-3 dims of a 2-5-d input, no value.
  EXPECT_EQ(
      reason(Sample(DType::kF32, {4}, 1), {{"pad", Ints{1, 1}}, {"mode", std::string("reflect")}}),
      Reason::kShapeMismatch);
  EXPECT_EQ(reason(x, {{"pad", Ints{1, 1, 1, 1, 1, 1, 1, 1}}, {"mode", std::string("replicate")}}),
            Reason::kBadAttribute);
  EXPECT_EQ(reason(x, {{"pad", Ints{}}, {"mode", std::string("replicate")}}),
            Reason::kBadAttribute);
  EXPECT_EQ(reason(x, {{"pad", Ints{1, 1}}, {"mode", std::string("reflect")}, {"value", 1.0}}),
            Reason::kBadAttribute);
  // Integers and bool pad in constant and circular mode, as in PyTorch, not reflect/replicate.
  const Tensor ints = Values(DType::kI64, {1, 2}, {1, 2});
  auto constant = RunOp("pad", {ints}, {{"pad", Ints{1, 1}}, {"value", 7.0}});
  ASSERT_TRUE(constant.ok()) << constant.status();
  EXPECT_TRUE(AllClose((*constant)[0], {7, 1, 2, 7}, 0, 0));
  auto circular = RunOp("pad", {ints}, {{"pad", Ints{1, 1}}, {"mode", std::string("circular")}});
  ASSERT_TRUE(circular.ok()) << circular.status();
  EXPECT_TRUE(AllClose((*circular)[0], {2, 1, 2, 1}, 0, 0));
  EXPECT_EQ(ReasonOf(RunOp("pad", {ints}, {{"pad", Ints{1, 1}}, {"mode", std::string("reflect")}})),
            Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("pad", {Values(DType::kU8, {1, 2}, {1, 2})},
                           {{"pad", Ints{1, 1}}, {"value", 300.0}})),
            Reason::kBadAttribute);
}

}  // namespace
}  // namespace tensord
