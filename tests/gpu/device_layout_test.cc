// The layout ops on the accelerator against the CPU backend: joins, splits, slices, flips,
// rolls, repeats, triangles, pads (every mode, negative pads) and diagonals, forward on every
// dtype and on non-contiguous inputs, and gradients (slice_backward, pad_backward,
// diagonal_backward and the sums of repeat) in f64. Copies move bits, so results must be
// exact; pad_backward sums in another order, so it gets a few ulps.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

constexpr DType kDTypes[] = {DType::kF32,  DType::kF64,  DType::kI32, DType::kI64,
                             DType::kBool, DType::kBF16, DType::kF16};

// `shape` as a non-contiguous view: the reversed shape, permuted back on the CPU.
Tensor Permuted(DType dtype, const Shape& shape, uint32_t seed) {
  Shape reversed(shape.rbegin(), shape.rend());
  std::vector<int64_t> dims;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) dims.push_back(d);
  return Run1("permute", {Random(dtype, reversed, seed, -3, 3)}, {{"dims", dims}});
}

TEST(DeviceLayout, ForwardMatchesTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (const ShapedCase& c : LayoutOpCases()) {
    for (DType dtype : kDTypes) {
      const std::string what =
          absl::StrCat(c.op, " ", DTypeName(dtype), " ", ShapeToString(c.inputs[0]), " case ",
                       &c - &LayoutOpCases()[0]);
      std::vector<Tensor> contiguous, strided;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        contiguous.push_back(Random(dtype, c.inputs[i], 10 + i, -3, 3));
        strided.push_back(Permuted(dtype, c.inputs[i], 20 + i));
      }
      EXPECT_TRUE(SameOnDevice(device, c.op, contiguous, c.attrs)) << what;
      EXPECT_TRUE(SameOnDevice(device, c.op, strided, c.attrs)) << what << " permuted";
    }
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

TEST(DeviceLayout, GradientsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (const ShapedCase& c : LayoutOpCases()) {
    std::vector<Tensor> in;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      in.push_back(Random(DType::kF64, c.inputs[i], 30 + i, -2, 2));
    }
    EXPECT_TRUE(SameGradientsOnDevice(device, c.op, in, c.attrs, 4))
        << c.op << " " << ShapeToString(c.inputs[0]) << " case " << &c - &LayoutOpCases()[0];
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

// Specials survive the copies bit for bit (the sign of zero, NaN, infinities), the fill of
// pad is the value asked for, and the attribute errors are the CPU's.
TEST(DeviceLayout, ValuesAndErrorsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  const Tensor specials =
      Values(DType::kF32, {2, 3}, {-0.0, NAN, INFINITY, -INFINITY, 1e-40, -2.5});
  for (const auto& [op, attrs] : std::vector<std::pair<std::string, AttrMap>>{
           {"flip", {{"dims", std::vector<int64_t>{0, 1}}}},
           {"roll", {{"shifts", std::vector<int64_t>{2}}}},
           {"pad", {{"pad", std::vector<int64_t>{1, 1}}, {"value", -0.0}}},
           {"pad", {{"pad", std::vector<int64_t>{2, 1}}, {"mode", std::string("reflect")}}},
           {"tril", {}},
           {"diagonal", {}}}) {
    EXPECT_TRUE(SameOnDevice(device, op, {specials}, attrs)) << op;
  }
  const Tensor x = Random(DType::kF32, {2, 3}, 40, -1, 1);
  for (const auto& [op, attrs] : std::vector<std::pair<std::string, AttrMap>>{
           {"narrow", {{"dim", int64_t{1}}, {"start", int64_t{2}}, {"length", int64_t{2}}}},
           {"flip", {{"dims", std::vector<int64_t>{0, 0}}}},
           {"roll", {{"shifts", std::vector<int64_t>{1, 2}}, {"dims", std::vector<int64_t>{0}}}},
           {"pad", {{"pad", std::vector<int64_t>{3, 3}}, {"mode", std::string("reflect")}}},
           {"diagonal", {{"dim1", int64_t{1}}, {"dim2", int64_t{1}}}},
           {"chunk", {{"chunks", int64_t{0}}}}}) {
    ::testing::AssertionResult same = SameOnDevice(device, op, {x}, attrs);
    EXPECT_TRUE(same) << op;
    CallEnv env;
    auto r = DeviceDispatcher().Call(op, {MoveTo(x, device)}, attrs, env);
    EXPECT_FALSE(r.ok()) << op << " should fail";
  }
  EXPECT_TRUE(SameOnDevice(device, "cat",
                           {Random(DType::kF32, {2, 3}, 41), Random(DType::kF32, {2, 4}, 42)},
                           {{"dim", int64_t{0}}}));
}

}  // namespace
}  // namespace tensord::testing
