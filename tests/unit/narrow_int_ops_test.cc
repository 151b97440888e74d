// Ops on u8, i8 and i16 tensors: stored in 1 or 2 bytes, computed in i32 and stored back, which
// wraps exactly as PyTorch's narrow integer kernels do. Expected values are PyTorch 1.13's
// results for the same calls (written out, since they are exact integers).
#include <gtest/gtest.h>

#include <cmath>

#include "server/backends/cpu/cpu_backend.h"
#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

const DType kU8 = DType::kU8, kI8 = DType::kI8, kI16 = DType::kI16;

Reason ReasonOf(const std::string& op, std::vector<Tensor> in, const AttrMap& attrs = {}) {
  auto r = RunOp(op, std::move(in), attrs);
  return r.ok() ? Reason::kUnspecified : GetReason(r.status());
}

TEST(NarrowInt, DTypeTable) {
  EXPECT_EQ(DTypeSize(kU8), 1u);
  EXPECT_EQ(DTypeSize(kI8), 1u);
  EXPECT_EQ(DTypeSize(kI16), 2u);
  for (const char* name : {"u8", "uint8"}) EXPECT_EQ(*ParseDType(name), kU8);
  for (const char* name : {"i8", "int8"}) EXPECT_EQ(*ParseDType(name), kI8);
  for (const char* name : {"i16", "int16", "short"}) EXPECT_EQ(*ParseDType(name), kI16);
  for (DType d : {kU8, kI8, kI16}) {
    EXPECT_TRUE(IsInt(d));
    EXPECT_TRUE(IsStorageOnly(d));
    EXPECT_FALSE(IsIndexInt(d));
    EXPECT_EQ(ComputeDType(d), DType::kI32);
  }
  EXPECT_EQ(WithStorageDTypes(kInt).ToString(), "i32,i64,u8,i8,i16");
  EXPECT_EQ(WithStorageDTypes(kFloat).ToString(), "f32,f64,bf16,f16");
  EXPECT_EQ(WithStorageDTypes(DTypeSet::Of(DType::kI64)).ToString(), "i64");
}

TEST(NarrowInt, PromotionMatchesTorch) {
  EXPECT_EQ(PromoteTypes(kU8, kI8), kI16);
  EXPECT_EQ(PromoteTypes(kI8, kU8), kI16);
  EXPECT_EQ(PromoteTypes(kU8, kI16), kI16);
  EXPECT_EQ(PromoteTypes(kI8, kI16), kI16);
  EXPECT_EQ(PromoteTypes(kU8, kU8), kU8);
  EXPECT_EQ(PromoteTypes(DType::kBool, kU8), kU8);
  EXPECT_EQ(PromoteTypes(kU8, DType::kI32), DType::kI32);
  EXPECT_EQ(PromoteTypes(kI16, DType::kI64), DType::kI64);
  EXPECT_EQ(PromoteTypes(kU8, DType::kBF16), DType::kBF16);
  EXPECT_EQ(PromoteTypes(kI8, DType::kF32), DType::kF32);
}

TEST(NarrowInt, FitsInFollowsTorchOverflowCheck) {
  EXPECT_TRUE(FitsIn(kU8, 255));
  EXPECT_TRUE(FitsIn(kU8, -1));  // wraps to 255, as torch allows
  EXPECT_FALSE(FitsIn(kU8, 256));
  EXPECT_FALSE(FitsIn(kU8, -256));
  EXPECT_TRUE(FitsIn(kI8, -128));
  EXPECT_FALSE(FitsIn(kI8, 128));
  EXPECT_TRUE(FitsIn(kI16, 32767));
  EXPECT_FALSE(FitsIn(kI16, -32769));
  EXPECT_FALSE(FitsIn(kI16, std::nan("")));
  EXPECT_TRUE(FitsIn(DType::kI64, -9.2e18));
}

TEST(NarrowInt, ArithmeticWrapsAsTorch) {
  Tensor a = Values(kU8, {3}, {250, 3, 0});
  Tensor b = Values(kU8, {3}, {10, 5, 1});
  Tensor sum = Run1("add", {a, b});
  EXPECT_EQ(sum.dtype(), kU8);
  EXPECT_TRUE(AllClose(sum, {4, 8, 1}, 0, 0));
  EXPECT_TRUE(AllClose(Run1("sub", {a, b}), {240, 254, 255}, 0, 0));
  EXPECT_TRUE(AllClose(Run1("neg", {b}), {246, 251, 255}, 0, 0));
  EXPECT_TRUE(AllClose(Run1("bitwise_not", {b}), {245, 250, 254}, 0, 0));
  Tensor c = Values(kI8, {3}, {100, -128, 7});
  EXPECT_TRUE(AllClose(Run1("mul", {c, IntOperand(2)}), {-56, 0, 14}, 0, 0));
  EXPECT_TRUE(AllClose(Run1("abs", {c}), {100, -128, 7}, 0, 0));
  Tensor d = Values(kI16, {2}, {32767, -32768});
  EXPECT_TRUE(AllClose(Run1("add", {d, IntOperand(1)}), {-32768, -32767}, 0, 0));
  // A Python number keeps the narrow dtype (and wraps: 1 + 300 is 45 in u8).
  Tensor n = Run1("add", {Values(kU8, {1}, {1}), IntOperand(300)});
  EXPECT_EQ(n.dtype(), kU8);
  EXPECT_TRUE(AllClose(n, {45}, 0, 0));
  EXPECT_EQ(Run1("mul", {a, ScalarOperand(0.5)}).dtype(), DType::kF32);
  EXPECT_TRUE(
      AllClose(Run1("div", {a, b}, {{"rounding_mode", std::string("floor")}}), {25, 0, 0}, 0, 0));
  Tensor q = Run1("div", {a, b});  // true division gives a float
  EXPECT_EQ(q.dtype(), DType::kF32);
  EXPECT_TRUE(AllClose(q, {25, 0.6, 0}));
}

TEST(NarrowInt, PromotionInOps) {
  Tensor u = Values(kU8, {2}, {200, 1});
  Tensor s = Values(kI8, {2}, {-1, -100});
  Tensor mixed = Run1("add", {u, s});
  EXPECT_EQ(mixed.dtype(), kI16);
  EXPECT_TRUE(AllClose(mixed, {199, -99}, 0, 0));
  Tensor gt = Run1("gt", {u, s});
  EXPECT_EQ(gt.dtype(), DType::kBool);
  EXPECT_TRUE(AllClose(gt, {1, 1}, 0, 0));
  EXPECT_EQ(Run1("add", {u, Values(DType::kI32, {2}, {1, 2})}).dtype(), DType::kI32);
  EXPECT_EQ(Run1("add", {u, Values(DType::kF32, {2}, {1, 2})}).dtype(), DType::kF32);
  // A 0-d i64 tensor does not outrank a dimensioned u8 tensor (same category).
  EXPECT_EQ(Run1("add", {u, Tensor::Scalar<int64_t>(3)}).dtype(), kU8);
  Tensor w = Run1("where", {Values(DType::kBool, {2}, {1, 0}), u, Values(kU8, {2}, {7, 9})});
  EXPECT_EQ(w.dtype(), kU8);
  EXPECT_TRUE(AllClose(w, {200, 9}, 0, 0));
}

// True division (and atan2) casts each integer operand straight to f32, as PyTorch's
// promote_integer_inputs_to_float: not through the operands' common integer dtype, which would
// wrap a 0-d operand that does not fit it first.
TEST(NarrowInt, TrueDivisionCastsIntegersStraightToFloat) {
  Tensor q = Run1("div", {Values(kI8, {2}, {-100, 50}), Tensor::Scalar<uint8_t>(168)});
  EXPECT_EQ(q.dtype(), DType::kF32);
  EXPECT_TRUE(AllClose(q, {-100.0 / 168, 50.0 / 168}));
  Tensor big =
      Run1("div", {Values(DType::kI32, {2}, {7, 100}), Tensor::Scalar<int64_t>(1LL << 40)});
  EXPECT_TRUE(AllClose(big, {7.0 / 1099511627776.0, 100.0 / 1099511627776.0}, 1e-6, 0));
  Tensor a = Run1("atan2", {Values(kU8, {1}, {1}), Tensor::Scalar<int8_t>(-1)});
  EXPECT_TRUE(AllClose(a, {std::atan2(1.0, -1.0)}));
  // With a rounding mode the division stays integral, in the common dtype (wrapping as torch).
  Tensor f = Run1("div", {Values(kI8, {1}, {-100}), Tensor::Scalar<uint8_t>(3)},
                  {{"rounding_mode", std::string("floor")}});
  EXPECT_EQ(f.dtype(), kI8);
  EXPECT_TRUE(AllClose(f, {-34}, 0, 0));
}

TEST(NarrowInt, ReductionsAccumulateInI64) {
  Tensor a = Values(kU8, {2, 2}, {255, 255, 255, 255});
  Tensor s = Run1("sum", {a});
  EXPECT_EQ(s.dtype(), DType::kI64);
  EXPECT_TRUE(AllClose(s, {1020}, 0, 0));
  Tensor cs = Run1("cumsum", {a}, {{"dim", int64_t{1}}});
  EXPECT_EQ(cs.dtype(), DType::kI64);
  EXPECT_TRUE(AllClose(cs, {255, 510, 255, 510}, 0, 0));
  EXPECT_EQ(Run1("prod", {a}).dtype(), DType::kI64);
  Tensor m = Run1("amax", {Values(kI8, {3}, {-5, 7, -128})}, {{"dim", std::vector<int64_t>{0}}});
  EXPECT_EQ(m.dtype(), kI8);
  EXPECT_TRUE(AllClose(m, {7}, 0, 0));
  Tensor sd = Run1("sum", {a}, {{"dtype", std::string("u8")}});
  EXPECT_EQ(sd.dtype(), kU8);
  EXPECT_TRUE(AllClose(sd, {252}, 0, 0));  // 1020 mod 256
}

TEST(NarrowInt, CastsConvertAsTorch) {
  Tensor f = Values(DType::kF32, {3}, {-1.5, 300.7, -200.2});
  EXPECT_TRUE(AllClose(CastTo(f, kU8), {255, 44, 56}, 0, 0));
  EXPECT_TRUE(AllClose(CastTo(f, kI8), {-1, 44, 56}, 0, 0));
  EXPECT_TRUE(AllClose(CastTo(f, kI16), {-1, 300, -200}, 0, 0));
  const DType all[] = {DType::kF32,  DType::kF64, DType::kI32, DType::kI64, DType::kBool,
                       DType::kBF16, DType::kF16, kU8,         kI8,         kI16};
  for (DType narrow : {kU8, kI8, kI16}) {
    for (DType other : all) {
      SCOPED_TRACE(std::string(DTypeName(narrow)) + " <-> " + std::string(DTypeName(other)));
      std::vector<double> v = {0, 1, 2, 100, 7, 0};
      if (IsBool(other)) v = {0, 1, 1, 1, 1, 0};
      Tensor src = CastTo(Values(DType::kF64, {6}, v), other);
      Tensor n = CastTo(src, narrow);
      ASSERT_EQ(n.dtype(), narrow);
      EXPECT_TRUE(AllClose(n, v, 0, 0));
      Tensor back = CastTo(n, other);
      EXPECT_EQ(back.dtype(), other);
      EXPECT_TRUE(AllClose(back, v, 0, 0));
    }
  }
  // Integer to narrower integer keeps the low bits.
  EXPECT_TRUE(AllClose(CastTo(Values(DType::kI64, {2}, {257, -1}), kU8), {1, 255}, 0, 0));
  EXPECT_TRUE(AllClose(CastTo(Values(kU8, {1}, {200}), kI8), {-56}, 0, 0));
  EXPECT_TRUE(AllClose(CastTo(Values(kU8, {2}, {0, 9}), DType::kBool), {0, 1}, 0, 0));
}

TEST(NarrowInt, ViewsCopiesAndIndexing) {
  Tensor a = Values(kU8, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor r = Run1("reshape", {a}, {{"shape", std::vector<int64_t>{3, 2}}});
  EXPECT_EQ(r.dtype(), kU8);
  EXPECT_EQ(r.storage(), a.storage());  // still a view
  Tensor t = Run1("transpose", {a}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
  EXPECT_TRUE(AllClose(t, {1, 4, 2, 5, 3, 6}, 0, 0));
  Tensor c = Run1("cat", {a, a}, {{"dim", int64_t{0}}});
  EXPECT_EQ(c.dtype(), kU8);
  EXPECT_EQ(c.shape(), (Shape{4, 3}));
  Tensor sel = Run1("index_select", {a, Values(DType::kI64, {2}, {2, 0})}, {{"dim", int64_t{1}}});
  EXPECT_EQ(sel.dtype(), kU8);
  EXPECT_TRUE(AllClose(sel, {3, 1, 6, 4}, 0, 0));
  Tensor before = a;
  ASSERT_TRUE(RunOp("assign", {a, Values(DType::kF32, {3}, {7, 8.9, -1})}).ok());
  EXPECT_TRUE(AllClose(before, {7, 8, 255, 7, 8, 255}, 0, 0));
}

TEST(NarrowInt, IndexOperandsMustBeI32OrI64) {
  Tensor x = Random(DType::kF32, {4, 3}, 1);
  Tensor idx = Values(kU8, {2}, {0, 1});
  EXPECT_EQ(ReasonOf("index_select", {x, idx}, {{"dim", int64_t{0}}}), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf("embedding", {idx, x}), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf("one_hot", {idx}), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf("cross_entropy", {x, Values(kI8, {4}, {0, 1, 2, 0})}), Reason::kDtypeMismatch);
}

TEST(NarrowInt, CreationAndFillValuesInRange) {
  Tensor z = Run1("zeros", {}, {{"shape", std::vector<int64_t>{3}}, {"dtype", std::string("u8")}});
  EXPECT_EQ(z.dtype(), kU8);
  EXPECT_TRUE(AllClose(z, {0, 0, 0}, 0, 0));
  Tensor f =
      Run1("full", {},
           {{"shape", std::vector<int64_t>{2}}, {"dtype", std::string("i8")}, {"value", -7.0}});
  EXPECT_TRUE(AllClose(f, {-7, -7}, 0, 0));
  EXPECT_EQ(
      ReasonOf(
          "full", {},
          {{"shape", std::vector<int64_t>{2}}, {"dtype", std::string("u8")}, {"value", 300.0}}),
      Reason::kBadAttribute);
  Tensor ar = Run1("arange", {},
                   {{"start", int64_t{0}},
                    {"end", int64_t{300}},
                    {"step", int64_t{100}},
                    {"dtype", std::string("u8")}});
  EXPECT_EQ(ar.dtype(), kU8);
  EXPECT_TRUE(AllClose(ar, {0, 100, 200}, 0, 0));
  EXPECT_EQ(ReasonOf("randint", {},
                     {{"shape", std::vector<int64_t>{2}},
                      {"low", int64_t{0}},
                      {"high", int64_t{300}},
                      {"dtype", std::string("u8")}}),
            Reason::kBadAttribute);
  Tensor m = Values(kU8, {2}, {1, 2});
  Tensor mask = Values(DType::kBool, {2}, {1, 0});
  EXPECT_TRUE(AllClose(Run1("masked_fill", {m, mask}, {{"value", -1.0}}), {255, 2}, 0, 0));
  EXPECT_EQ(ReasonOf("masked_fill", {m, mask}, {{"value", 300.0}}), Reason::kBadAttribute);
}

TEST(NarrowInt, KernelCapabilities) {
  auto backend = MakeCpuBackend();
  const OpRegistry& reg = OpRegistry::Builtin();
  auto supports = [&](const std::string& op, std::vector<DType> d) {
    return backend->Supports({**reg.Find(op), d});
  };
  EXPECT_TRUE(supports("to_dtype", {kU8, DType::kF32}));
  EXPECT_TRUE(supports("to_dtype", {DType::kBF16, kI8}));
  EXPECT_TRUE(supports("reshape", {kI16}));
  EXPECT_TRUE(supports("assign", {kU8, DType::kF32}));
  // Compute kernels never see narrow integers: the dispatcher runs those calls in i32.
  EXPECT_FALSE(supports("add", {kU8, kU8}));
  EXPECT_FALSE(supports("sum", {kI16}));
  EXPECT_TRUE(supports("add", {DType::kI32, DType::kI32}));
}

}  // namespace
}  // namespace tensord
