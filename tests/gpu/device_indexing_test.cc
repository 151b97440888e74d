// The ops that index by tensors on the accelerator against the CPU backend: index_select,
// gather, embedding (reads through the index), scatter, scatter_add, index_add and the
// gradients of the reads (writes, with duplicate indices: the last write wins or the writes
// add up in the CPU's order), masked_fill and one_hot, and the selections whose size the data
// gives (nonzero, masked_select and its gradient). Bad indices must fail with the CPU's error
// before anything is written.
#include <limits>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

constexpr DType kDTypes[] = {DType::kF32,  DType::kF64,  DType::kI32, DType::kI64,
                             DType::kBool, DType::kBF16, DType::kF16};

TEST(DeviceIndexing, ForwardMatchesTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (const IndexingCase& c : IndexingOpCases()) {
    for (DType dtype : kDTypes) {
      const std::string what =
          absl::StrCat(c.op, " ", DTypeName(dtype), " case ", &c - &IndexingOpCases()[0]);
      EXPECT_TRUE(SameOnDevice(device, c.op, c.inputs(dtype), c.attrs)) << what;
    }
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

TEST(DeviceIndexing, GradientsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (const IndexingCase& c : IndexingOpCases()) {
    if (c.op == "one_hot" || c.op == "nonzero") continue;  // not differentiable
    EXPECT_TRUE(SameGradientsOnDevice(device, c.op, c.inputs(DType::kF64), c.attrs))
        << c.op << " case " << &c - &IndexingOpCases()[0];
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

// NaN is nonzero and -0 is zero, in every float dtype, as in torch.
TEST(DeviceIndexing, NonzeroCountsNanAndNotNegativeZero) {
  TENSORD_REQUIRE_DEVICE(device);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    const Tensor x = Values(dtype, {2, 4}, {0, -0.0, nan, 1, 0, -inf, -0.0, 1e-3});
    EXPECT_TRUE(SameOnDevice(device, "nonzero", {x})) << DTypeName(dtype);
    CallEnv env;
    auto on_device = DeviceDispatcher().Call("nonzero", {MoveTo(x, device)}, {}, env);
    ASSERT_TRUE(on_device.ok()) << on_device.status();
    EXPECT_TRUE(AllClose(MoveTo((*on_device)[0], kHostDevice), {0, 2, 0, 3, 1, 1, 1, 3}, 0, 0))
        << DTypeName(dtype);
    EXPECT_TRUE(SameOnDevice(device, "masked_select", {x, Values(DType::kBool, {4}, {1, 0, 1, 1})}))
        << DTypeName(dtype);
  }
}

// Each failing call gives the CPU's error (reason and metadata compared by SameOnDevice) and
// leaves the device's input as it was.
TEST(DeviceIndexing, BadIndicesFailLikeTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  const Tensor x = Random(DType::kF32, {3, 4}, 50, -1, 1);
  const Tensor bad = Values(DType::kI64, {2, 2}, {0, 1, 9, 2});
  const Tensor negative = Values(DType::kI32, {2, 2}, {0, -1, 2, 1});
  const AttrMap dim1 = {{"dim", int64_t{1}}};
  const std::vector<std::tuple<std::string, std::vector<Tensor>, AttrMap>> calls = {
      {"index_select", {x, Values(DType::kI64, {3}, {1, 4, 0})}, dim1},
      {"gather", {x, negative}, dim1},
      {"scatter", {x, bad, Random(DType::kF32, {2, 2}, 51)}, dim1},
      {"scatter_add", {x, negative, Random(DType::kF32, {2, 2}, 52)}, dim1},
      {"index_add",
       {x, Values(DType::kI64, {2}, {3, 1}), Random(DType::kF32, {2, 4}, 53)},
       {{"dim", int64_t{0}}}},
      {"embedding", {Values(DType::kI64, {2}, {0, 3}), x}, {}},
      {"one_hot", {negative}, {}},
      {"one_hot", {Values(DType::kI64, {2}, {0, 5})}, {{"num_classes", int64_t{3}}}},
      // A gradient of another length than the mask selects.
      {"masked_select_backward",
       {Random(DType::kF32, {3}, 55), Values(DType::kBool, {2, 2}, {1, 0, 0, 1})},
       {{"size", std::vector<int64_t>{2, 2}}}},
      // A number that the input's dtype cannot hold.
      {"scatter",
       {Random(DType::kI32, {3, 4}, 54, 0, 5), Values(DType::kI64, {1, 1}, {0}),
        ScalarOperand(1e10)},
       dim1},
  };
  for (const auto& [op, inputs, attrs] : calls) {
    EXPECT_TRUE(SameOnDevice(device, op, inputs, attrs)) << op;
    std::vector<Tensor> moved;
    for (const Tensor& t : inputs) moved.push_back(t.wrapped_number() ? t : MoveTo(t, device));
    CallEnv env;
    auto r = DeviceDispatcher().Call(op, moved, attrs, env);
    EXPECT_FALSE(r.ok()) << op << " should fail";
    EXPECT_TRUE(AllClose(MoveTo(moved[0], kHostDevice), inputs[0], 0, 0)) << op << " changed";
  }
}

}  // namespace
}  // namespace tensord::testing
