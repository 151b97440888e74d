// Ops on bf16 and f16 tensors: stored in 2 bytes, computed in f32 (or by a kernel with f32
// accumulation). Each op runs on 2-byte inputs and is compared with
//  - the same op in f32 on the same (exactly representable) values, rounded to the 2-byte
//    dtype: the upcast path must reproduce it bit for bit;
//  - the op in f64 on the same values, at the dtype's stated tolerance (what a user sees).
// Tolerances: bf16 (8 significant bits, half-ulp 2^-9) rtol 1e-2, atol 1e-2;
//             f16 (11 significant bits, half-ulp 2^-12) rtol 1e-3, atol 1e-3.
// The atol covers results near zero after cancellation (sums, matmul, conv).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/half.h"
#include "server/backends/cpu/cpu_backend.h"
#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

struct Tol {
  double rtol, atol;
};
Tol TolFor(DType d) { return d == DType::kBF16 ? Tol{1e-2, 1e-2} : Tol{1e-3, 1e-3}; }

Tensor Cast(const Tensor& t, DType d) {
  return Run1("to_dtype", {t}, {{"dtype", std::string(DTypeName(d))}});
}

// `op` on `inputs` (f32; float inputs are rounded to `low` first) in three ways.
void CheckOp(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
             DType low) {
  SCOPED_TRACE(op + " in " + std::string(DTypeName(low)));
  std::vector<Tensor> lows, f32s, f64s;
  for (const Tensor& t : inputs) {
    if (t.dtype() != DType::kF32) {
      lows.push_back(t);
      f32s.push_back(t);
      f64s.push_back(t);
      continue;
    }
    Tensor l = Cast(t, low);
    ASSERT_EQ(l.dtype(), low);
    lows.push_back(l);
    f32s.push_back(Cast(l, DType::kF32));
    f64s.push_back(Cast(l, DType::kF64));
  }
  auto got = RunOp(op, lows, attrs);
  ASSERT_TRUE(got.ok()) << got.status();
  auto want32 = RunOp(op, f32s, attrs);
  ASSERT_TRUE(want32.ok()) << want32.status();
  auto want64 = RunOp(op, f64s, attrs);
  ASSERT_TRUE(want64.ok()) << want64.status();
  ASSERT_EQ(got->size(), want32->size());
  const Tol tol = TolFor(low);
  for (size_t k = 0; k < got->size(); ++k) {
    const Tensor& g = (*got)[k];
    const Tensor& w = (*want32)[k];
    ASSERT_EQ(g.shape(), w.shape()) << "output " << k;
    if (w.dtype() != DType::kF32) {  // indices, booleans: identical
      EXPECT_EQ(g.dtype(), w.dtype());
      EXPECT_TRUE(AllClose(g, w, 0, 0)) << "output " << k;
      continue;
    }
    EXPECT_EQ(g.dtype(), low) << "output " << k;
    EXPECT_TRUE(AllClose(g, Cast(w, low), 0, 0)) << "output " << k << " vs f32 rounded";
    EXPECT_TRUE(AllClose(g, (*want64)[k], tol.rtol, tol.atol)) << "output " << k << " vs f64";
  }
}

class LowPrecisionOps : public ::testing::TestWithParam<DType> {};

TEST_P(LowPrecisionOps, MatmulAndLinear) {
  const DType d = GetParam();
  CheckOp("matmul", {Random(DType::kF32, {5, 7}, 1), Random(DType::kF32, {7, 3}, 2)}, {}, d);
  CheckOp("matmul", {Random(DType::kF32, {2, 4, 6}, 3), Random(DType::kF32, {6}, 4)}, {}, d);
  CheckOp("matmul", {Random(DType::kF32, {64, 96}, 5), Random(DType::kF32, {96, 48}, 6)}, {}, d);
  CheckOp(
      "linear",
      {Random(DType::kF32, {4, 8}, 7), Random(DType::kF32, {5, 8}, 8), Random(DType::kF32, {5}, 9)},
      {}, d);
  CheckOp("linear", {Random(DType::kF32, {2, 3, 8}, 10), Random(DType::kF32, {6, 8}, 11)}, {}, d);
}

TEST_P(LowPrecisionOps, Conv2d) {
  const DType d = GetParam();
  CheckOp("conv2d",
          {Random(DType::kF32, {2, 3, 7, 6}, 1), Random(DType::kF32, {4, 3, 3, 3}, 2),
           Random(DType::kF32, {4}, 3)},
          {{"padding", int64_t{1}}}, d);
  CheckOp("conv2d", {Random(DType::kF32, {1, 4, 8, 8}, 4), Random(DType::kF32, {6, 2, 3, 3}, 5)},
          {{"stride", int64_t{2}}, {"groups", int64_t{2}}}, d);
}

TEST_P(LowPrecisionOps, Elementwise) {
  const DType d = GetParam();
  Tensor a = Random(DType::kF32, {3, 5}, 1, -2, 2);
  Tensor b = Random(DType::kF32, {5}, 2, -2, 2);
  for (const char* op : {"add", "sub", "mul", "div", "maximum"}) CheckOp(op, {a, b}, {}, d);
  CheckOp("add", {a, b}, {{"alpha", 0.5}}, d);
  for (const char* op : {"exp", "relu", "sigmoid", "tanh", "neg", "abs", "gelu", "silu"}) {
    CheckOp(op, {a}, {}, d);
  }
  CheckOp("sqrt", {Random(DType::kF32, {4, 4}, 3, 0.1, 4)}, {}, d);
  CheckOp("log", {Random(DType::kF32, {4, 4}, 4, 0.1, 4)}, {}, d);
  // Comparisons give bool, computed on the 2-byte values.
  for (const char* op : {"lt", "eq", "ge"}) CheckOp(op, {a, b}, {}, d);
  Tensor cond = Random(DType::kBool, {3, 5}, 5);
  CheckOp("where", {cond, a, b}, {}, d);
}

TEST_P(LowPrecisionOps, Reductions) {
  const DType d = GetParam();
  Tensor x = Random(DType::kF32, {4, 6, 5}, 1);
  CheckOp("sum", {x}, {}, d);
  CheckOp("sum", {x}, {{"dim", std::vector<int64_t>{1}}, {"keepdim", true}}, d);
  CheckOp("mean", {x}, {{"dim", std::vector<int64_t>{0, 2}}}, d);
  CheckOp("amax", {x}, {{"dim", std::vector<int64_t>{2}}}, d);
  CheckOp("argmax", {x}, {{"dim", int64_t{1}}}, d);
  CheckOp("max", {x}, {{"dim", int64_t{0}}}, d);  // values in the 2-byte dtype, indices i64
  CheckOp("softmax", {x}, {{"dim", int64_t{-1}}}, d);
  CheckOp("log_softmax", {x}, {{"dim", int64_t{1}}}, d);
}

TEST_P(LowPrecisionOps, ReductionsAccumulateInF32) {
  // 4096 ones: a 2-byte accumulator would stall (bf16 at 256, f16 at 2048).
  const DType d = GetParam();
  Tensor ones = Run1("ones", {}, {{"shape", std::vector<int64_t>{4096}}, {"dtype", "bf16"}});
  Tensor x = Cast(ones, d);
  Tensor s = Run1("sum", {x});
  EXPECT_EQ(s.dtype(), d);
  EXPECT_EQ(s.ElementAsDouble(0), 4096.0);
  EXPECT_EQ(Run1("mean", {x}).ElementAsDouble(0), 1.0);
}

TEST_P(LowPrecisionOps, DtypeAttributes) {
  const DType d = GetParam();
  const std::string name(DTypeName(d));
  Tensor z = Run1("zeros", {}, {{"shape", std::vector<int64_t>{2, 3}}, {"dtype", name}});
  EXPECT_EQ(z.dtype(), d);
  EXPECT_TRUE(AllClose(z, std::vector<double>(6, 0.0), 0, 0));
  Tensor f =
      Run1("full", {}, {{"shape", std::vector<int64_t>{3}}, {"dtype", name}, {"value", 0.1}});
  EXPECT_EQ(f.dtype(), d);
  const double rounded =
      d == DType::kBF16 ? BF16ToFloat(FloatToBF16(0.1f)) : HalfToFloat(FloatToHalf(0.1f));
  EXPECT_TRUE(AllClose(f, {rounded, rounded, rounded}, 0, 0));
  Tensor r = Run1("arange", {}, {{"end", int64_t{5}}, {"dtype", name}});
  EXPECT_EQ(r.dtype(), d);
  EXPECT_TRUE(AllClose(r, {0, 1, 2, 3, 4}, 0, 0));
  // Rules that list compute dtypes only (randn, eye) still give the 2-byte dtype.
  Tensor n = Run1("randn", {},
                  {{"shape", std::vector<int64_t>{8}}, {"dtype", name}, {"seed", int64_t{3}}});
  EXPECT_EQ(n.dtype(), d);
  Tensor n32 = Run1("randn", {}, {{"shape", std::vector<int64_t>{8}}, {"seed", int64_t{3}}});
  EXPECT_TRUE(AllClose(n, Cast(n32, d), 0, 0));
  EXPECT_EQ(Run1("eye", {}, {{"n", int64_t{3}}, {"dtype", name}}).dtype(), d);
  Tensor zl = Run1("zeros_like", {Random(DType::kF32, {2}, 1)}, {{"dtype", name}});
  EXPECT_EQ(zl.dtype(), d);
  // sum of f32 into a 2-byte result, and of a 2-byte input into f32.
  Tensor x = Random(DType::kF32, {10}, 2);
  Tensor s = Run1("sum", {x}, {{"dtype", name}});
  EXPECT_EQ(s.dtype(), d);
  EXPECT_TRUE(AllClose(s, Cast(Run1("sum", {x}), d), 0, 0));
  Tensor s32 = Run1("sum", {Cast(x, d)}, {{"dtype", "f32"}});
  EXPECT_EQ(s32.dtype(), DType::kF32);
  Tensor sm = Run1("softmax", {Cast(x, d)}, {{"dim", int64_t{0}}, {"dtype", "f32"}});
  EXPECT_EQ(sm.dtype(), DType::kF32);
}

TEST_P(LowPrecisionOps, Promotion) {
  const DType d = GetParam();
  Tensor a = Cast(Random(DType::kF32, {2, 3}, 1), d);
  EXPECT_EQ(Run1("add", {a, Random(DType::kF32, {3}, 2)}).dtype(), DType::kF32);
  EXPECT_EQ(Run1("mul", {a, Random(DType::kF64, {3}, 2)}).dtype(), DType::kF64);
  EXPECT_EQ(Run1("mul", {a, Random(DType::kI64, {3}, 2)}).dtype(), d);
  EXPECT_EQ(Run1("mul", {a, ScalarOperand(0.5)}).dtype(), d);
  EXPECT_EQ(Run1("mul", {Random(DType::kI32, {3}, 2), ScalarOperand(0.5)}).dtype(), DType::kF32);
  // A 0-d f32 tensor does not outrank a dimensioned 2-byte tensor (same category).
  EXPECT_EQ(Run1("add", {a, Tensor::Scalar<float>(1.5f)}).dtype(), d);
  const DType other = d == DType::kBF16 ? DType::kF16 : DType::kBF16;
  EXPECT_EQ(Run1("add", {a, Cast(Random(DType::kF32, {3}, 3), other)}).dtype(), DType::kF32);
  // An int tensor with a 0-d 2-byte tensor: the float category wins, in the 2-byte dtype.
  EXPECT_EQ(
      Run1("div", {Random(DType::kI64, {3}, 4, 1, 5), Cast(Tensor::Scalar<float>(2), d)}).dtype(),
      d);
}

TEST_P(LowPrecisionOps, ViewsAndCopiesStayInTwoBytes) {
  const DType d = GetParam();
  Tensor a = Cast(Random(DType::kF32, {2, 3, 4}, 1), d);
  Tensor r = Run1("reshape", {a}, {{"shape", std::vector<int64_t>{6, 4}}});
  EXPECT_EQ(r.dtype(), d);
  EXPECT_EQ(r.storage(), a.storage());  // still a view
  Tensor t = Run1("transpose", {a}, {{"dim0", int64_t{0}}, {"dim1", int64_t{2}}});
  EXPECT_EQ(t.dtype(), d);
  Tensor t32 =
      Run1("transpose", {Cast(a, DType::kF32)}, {{"dim0", int64_t{0}}, {"dim1", int64_t{2}}});
  EXPECT_TRUE(AllClose(t, t32, 0, 0));
  CheckOp("expand", {Random(DType::kF32, {3, 1}, 2)}, {{"size", std::vector<int64_t>{2, 3, 4}}}, d);
  CheckOp("cat", {Random(DType::kF32, {2, 3}, 3), Random(DType::kF32, {1, 3}, 4)},
          {{"dim", int64_t{0}}}, d);
}

TEST_P(LowPrecisionOps, AssignWritesInPlace) {
  const DType d = GetParam();
  Tensor target = Cast(Random(DType::kF32, {2, 3}, 1), d);
  Tensor before = target;
  Tensor value = Values(DType::kF32, {3}, {1.5, -2.25, 1e-3});
  auto out = RunOp("assign", {target, value});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].storage(), before.storage());
  const double third =
      d == DType::kBF16 ? BF16ToFloat(FloatToBF16(1e-3f)) : HalfToFloat(FloatToHalf(1e-3f));
  EXPECT_TRUE(AllClose(before, {1.5, -2.25, third, 1.5, -2.25, third}, 0, 0));
  // A 2-byte value into an f32 target widens exactly.
  Tensor f = Random(DType::kF32, {3}, 2);
  ASSERT_TRUE(RunOp("assign", {f, Cast(value, d)}).ok());
  EXPECT_TRUE(AllClose(f, {1.5, -2.25, third}, 0, 0));
}

TEST_P(LowPrecisionOps, OpsWithoutFloatDtypesRefuse) {
  auto r = RunOp("bitwise_and", {Cast(Random(DType::kF32, {3}, 1), GetParam()),
                                 Cast(Random(DType::kF32, {3}, 2), GetParam())});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(GetReason(r.status()), Reason::kDtypeMismatch);
}

INSTANTIATE_TEST_SUITE_P(BF16AndF16, LowPrecisionOps, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// to_dtype between every pair of dtypes through the 2-byte ones.
TEST(LowPrecisionCast, EveryPair) {
  const std::vector<double> values = {0.0, -1.0, 2.5, 3.0, -7.0, 100.0, 0.0078125, 1.0};
  const DType all[] = {DType::kF32,  DType::kF64,  DType::kI32, DType::kI64,
                       DType::kBool, DType::kBF16, DType::kF16};
  for (DType low : {DType::kBF16, DType::kF16}) {
    for (DType other : all) {
      SCOPED_TRACE(std::string(DTypeName(low)) + " <-> " + std::string(DTypeName(other)));
      // Values every dtype holds exactly (bool: 0/1).
      std::vector<double> v = values;
      if (IsInt(other)) v = {0, -1, 2, 3, -7, 100, 0, 1};
      if (IsBool(other)) v = {0, 1, 1, 0, 1, 0, 0, 1};
      Tensor src = Run1("to_dtype", {Values(DType::kF64, {8}, v)},
                        {{"dtype", std::string(DTypeName(other))}});
      Tensor l = Cast(src, low);
      ASSERT_EQ(l.dtype(), low);
      EXPECT_TRUE(AllClose(l, v, 0, 0));
      Tensor back = Cast(l, other);
      EXPECT_EQ(back.dtype(), other);
      EXPECT_TRUE(AllClose(back, v, 0, 0));
    }
  }
  // Truncation toward zero and bool semantics (NaN is true) from a 2-byte source.
  for (DType low : {DType::kBF16, DType::kF16}) {
    Tensor x = Cast(Values(DType::kF32, {3}, {2.75, -2.75, 0.0}), low);
    EXPECT_TRUE(AllClose(Cast(x, DType::kI32), {2, -2, 0}, 0, 0));
    EXPECT_TRUE(AllClose(Cast(x, DType::kI64), {2, -2, 0}, 0, 0));
    Tensor n = Cast(Values(DType::kF32, {3}, {std::nan(""), 0.0, -0.5}), low);
    EXPECT_TRUE(std::isnan(n.ElementAsDouble(0)));
    EXPECT_TRUE(AllClose(Cast(n, DType::kBool), {1, 0, 1}, 0, 0));
  }
  // f64 → bf16 goes through float, as torch's c10::BFloat16 conversion does: 1 + 2^-8 + 2^-30
  // is above the midpoint 1 + 2^-8, but in float it is exactly that midpoint, and ties go to
  // the even 1.0.
  Tensor tie = Cast(Values(DType::kF64, {1}, {1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30)}),
                    DType::kBF16);
  EXPECT_EQ(tie.ElementAsDouble(0), 1.0);
  // Overflow to infinity in f16, not in bf16.
  Tensor big = Values(DType::kF32, {1}, {1e5});
  EXPECT_TRUE(std::isinf(Cast(big, DType::kF16).ElementAsDouble(0)));
  EXPECT_EQ(Cast(big, DType::kBF16).ElementAsDouble(0), 99840.0);
  // bf16 <-> f16 directly.
  Tensor hb = Cast(Cast(Values(DType::kF32, {2}, {1.0 / 3, 1e-6}), DType::kF16), DType::kBF16);
  EXPECT_EQ(hb.ElementAsDouble(0), BF16ToFloat(FloatToBF16(HalfToFloat(FloatToHalf(1.0f / 3)))));
}

TEST(LowPrecisionCast, KernelCapabilities) {
  auto backend = MakeCpuBackend();
  const OpRegistry& reg = OpRegistry::Builtin();
  auto supports = [&](const std::string& op, std::vector<DType> d) {
    return backend->Supports({**reg.Find(op), d});
  };
  EXPECT_TRUE(supports("to_dtype", {DType::kBF16}));
  EXPECT_TRUE(supports("to_dtype", {DType::kF16, DType::kF32}));
  EXPECT_TRUE(supports("to_dtype", {DType::kF32, DType::kBF16}));
  EXPECT_TRUE(supports("reshape", {DType::kBF16}));
  EXPECT_TRUE(supports("assign", {DType::kF16, DType::kF32}));
  // Compute kernels never see 2-byte dtypes: the dispatcher runs those calls in f32.
  EXPECT_FALSE(supports("add", {DType::kBF16, DType::kBF16}));
  EXPECT_FALSE(supports("where", {DType::kBool, DType::kBF16, DType::kBF16}));
  EXPECT_FALSE(supports("embedding", {DType::kI64, DType::kF16}));
  EXPECT_FALSE(supports("zeros", {DType::kBF16}));
  EXPECT_TRUE(supports("add", {DType::kF32, DType::kF32}));
}

}  // namespace
}  // namespace tensord
