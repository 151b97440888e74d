// The group ops on the accelerator against the CPU backend: reductions along dims (with and
// without indices), statistics, norms, scans and the softmax family, forward and gradient.
// Inputs hold ties, NaNs, infinities and zeros where the CPU kernels make choices (the first
// index of a tie, NaN winning, a gradient shared among tied maxima, products with zeros), and
// cover 0-d, empty and transposed tensors.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Small integers as values: ties for the extrema, exact zeros for the products.
Tensor Ties(DType dtype, Shape shape, uint32_t seed) {
  Tensor r = Random(DType::kI64, std::move(shape), seed, -3, 4);
  return Run1("to_dtype", {r}, {{"dtype", std::string(DTypeName(dtype))}});
}

// A [2, 3, 4] float tensor with a NaN in one row, infinities in another.
Tensor Specials(DType dtype) {
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) v[i] = (i * 7 % 11) * 0.25 - 1.0;
  v[5] = kNan;
  v[13] = kInf;
  v[14] = -kInf;
  v[20] = -kInf;
  return Values(dtype, {2, 3, 4}, v);
}

Tensor Transposed(DType dtype, uint32_t seed) {
  return Run1("transpose", {Random(dtype, {3, 4, 2}, seed, -2, 2)},
              {{"dim0", int64_t{0}}, {"dim1", int64_t{2}}});
}

bool TakesIntegers(const std::string& op) {
  return op == "amax" || op == "amin" || op == "max" || op == "min" || op == "argmax" ||
         op == "argmin" || op == "cumsum" || op == "cumprod";
}

TEST(DeviceReductions, ForwardMatchesTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (const auto& [op, attrs] : GroupOpCases()) {
    std::vector<DType> dtypes = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16};
    if (TakesIntegers(op)) dtypes.insert(dtypes.end(), {DType::kI32, DType::kI64, DType::kBool});
    for (DType dtype : dtypes) {
      const std::string what = absl::StrCat(op, " ", DTypeName(dtype));
      std::vector<Tensor> inputs = {Random(dtype, {2, 3, 4}, 10, -2, 2), Ties(dtype, {2, 3, 4}, 11),
                                    Transposed(dtype, 12), Random(dtype, {}, 13, -2, 2),
                                    Random(dtype, {3, 0, 2}, 14)};
      if (IsFloat(dtype)) inputs.push_back(Specials(dtype));
      for (size_t i = 0; i < inputs.size(); ++i) {
        // Sums of a few dozen terms in another order: a few ulps each.
        EXPECT_TRUE(SameOnDevice(device, op, {inputs[i]}, attrs, 8)) << what << " input " << i;
      }
    }
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

TEST(DeviceReductions, GradientsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (const auto& [op, attrs] : GroupOpCases()) {
    if (op == "argmax" || op == "argmin") continue;  // not differentiable
    for (const Tensor& x : {Random(DType::kF64, {2, 3, 4}, 20, -2, 2),
                            Ties(DType::kF64, {2, 3, 4}, 21), Transposed(DType::kF64, 22)}) {
      EXPECT_TRUE(SameGradientsOnDevice(device, op, {x}, attrs, 8))
          << op << " " << ShapeToString(x.shape());
    }
  }
  // prod's gradient is the group kernel of prod_backward (zeros in the ties input).
  for (const AttrMap& attrs : std::vector<AttrMap>{{}, {{"dim", int64_t{1}}}}) {
    EXPECT_TRUE(SameGradientsOnDevice(device, "prod", {Ties(DType::kF64, {2, 3, 4}, 23)}, attrs));
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

// cross_entropy and nll_loss with class-index targets (weights, ignore_index, label
// smoothing, every reduction, a target out of range) and with probability targets.
TEST(DeviceReductions, CrossEntropyMatchesTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  const Tensor weight = Values(DType::kF64, {5}, {0.5, 1.0, 2.0, 0.25, 1.5});
  struct Case {
    Shape input;
    Tensor target;
  };
  const std::vector<Case> cases = {
      {{4, 5}, Values(DType::kI64, {4}, {0, 4, 2, -100})},
      {{2, 5, 3}, Values(DType::kI32, {2, 3}, {1, 0, 4, 3, 3, 2})},
      {{5}, Values(DType::kI64, {}, {3})},
      {{0, 5}, Values(DType::kI64, {0}, {})},
  };
  for (const std::string reduction : {"mean", "sum", "none"}) {
    for (const Case& k : cases) {
      for (bool weighted : {false, true}) {
        for (double ls : {0.0, 0.1}) {
          AttrMap attrs = {{"reduction", reduction}, {"label_smoothing", ls}};
          const Tensor x = Random(DType::kF64, k.input, 40, -3, 3);
          std::vector<Tensor> in = {x, k.target};
          if (weighted) in.push_back(weight);
          const std::string what = absl::StrCat(reduction, " ", ShapeToString(k.input),
                                                weighted ? " weighted" : "", " ls=", ls);
          EXPECT_TRUE(SameOnDevice(device, "cross_entropy", in, attrs, 8)) << what;
          EXPECT_TRUE(SameGradientsOnDevice(device, "cross_entropy", in, attrs, 8)) << what;
          in[0] = Run1("to_dtype", {x}, {{"dtype", std::string("f32")}});
          if (weighted) in[2] = Run1("to_dtype", {weight}, {{"dtype", std::string("f32")}});
          EXPECT_TRUE(SameOnDevice(device, "cross_entropy", in, attrs, 8)) << what << " f32";
          if (ls == 0) {
            in[0] = Run1("log_softmax", {x}, {{"dim", int64_t{k.input.size() == 1 ? 0 : 1}}});
            if (weighted) in[2] = weight;
            attrs.erase("label_smoothing");
            EXPECT_TRUE(SameGradientsOnDevice(device, "nll_loss", in, attrs, 8)) << what;
          }
        }
      }
    }
  }
  // A target out of range: the same INDEX_OUT_OF_RANGE on both devices.
  const Tensor x = Random(DType::kF32, {3, 4}, 41);
  EXPECT_TRUE(SameOnDevice(device, "cross_entropy", {x, Values(DType::kI64, {3}, {0, 4, 1})}));
  auto r = DeviceDispatcher().Call(
      "cross_entropy", {MoveTo(x, device), MoveTo(Values(DType::kI64, {3}, {0, -2, 1}), device)},
      {}, CallEnv{});
  EXPECT_EQ(GetReason(r.status()), Reason::kIndexOutOfRange) << r.status();
  // Probability targets compose log-softmax, mul and sum.
  const Tensor p = Run1("softmax", {Random(DType::kF64, {3, 4}, 42)}, {{"dim", int64_t{1}}});
  EXPECT_TRUE(SameGradientsOnDevice(device, "cross_entropy", {Random(DType::kF64, {3, 4}, 43), p},
                                    {{"label_smoothing", 0.2}}, 8));
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

// A softmax over a wide row and a long reduction: many elements per group.
TEST(DeviceReductions, LargeGroupsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  Tensor x = Random(DType::kF32, {3, 5000}, 30, -4, 4);
  EXPECT_TRUE(SameOnDevice(device, "softmax", {x}, {{"dim", int64_t{1}}}, 4));
  EXPECT_TRUE(SameOnDevice(device, "logsumexp", {x}, {{"dim", std::vector<int64_t>{1}}}, 4));
  EXPECT_TRUE(SameOnDevice(device, "var", {x}, {}, 64));
  EXPECT_TRUE(SameOnDevice(device, "argmax", {x}, {}));
  EXPECT_TRUE(SameOnDevice(device, "cumsum", {x}, {{"dim", int64_t{1}}}, 64));
}

}  // namespace
}  // namespace tensord::testing
