// A device without fp64, simulated by TENSORD_GPU_FP64=off (set before the device opens): f64
// tensors are refused before anything is allocated, while the group ops (reductions, scans,
// softmax, statistics), the norms and the losses run in f32 with float accumulators and
// compensated sums, and match the CPU (which accumulates in double) within f32 tolerances.
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

// Before main, so before the device list is made.
const bool kFp64Off = [] { return setenv("TENSORD_GPU_FP64", "off", 1) == 0; }();

Tensor F32(const Tensor& t) { return CastTo(t, DType::kF32); }

TEST(DeviceWithoutFp64, RefusesF64AndRunsF32) {
  TENSORD_REQUIRE_DEVICE(device);
  ASSERT_TRUE(kFp64Off);
  const Tensor x = Random(DType::kF64, {3, 4}, 1);
  auto refused = DeviceDispatcher().Call("sum", {MoveTo(x, device)}, {}, CallEnv{});
  EXPECT_EQ(GetReason(refused.status()), Reason::kUnsupportedOnBackend) << refused.status();
  // sum of f32 into f64 (an f64 output) is refused too.
  auto wide = DeviceDispatcher().Call("sum", {MoveTo(F32(x), device)},
                                      {{"dtype", std::string("f64")}}, CallEnv{});
  EXPECT_EQ(GetReason(wide.status()), Reason::kUnsupportedOnBackend) << wide.status();
  EXPECT_TRUE(SameOnDevice(device, "sum", {F32(x)}));
}

TEST(DeviceWithoutFp64, GroupOpsRunInF32) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (const auto& [op, attrs] : GroupOpCases()) {
    if (attrs.count("dtype") > 0) continue;  // an f64 output
    for (const Tensor& x :
         {Random(DType::kF32, {2, 3, 4}, 10, -2, 2), Random(DType::kF32, {3, 0, 2}, 14)}) {
      EXPECT_TRUE(SameOnDevice(device, op, {x}, attrs, 8)) << op << " " << ShapeToString(x.shape());
    }
    if (op == "argmax" || op == "argmin") continue;  // not differentiable
    EXPECT_TRUE(
        SameGradientsOnDevice(device, op, {Random(DType::kF32, {2, 3, 4}, 20, -2, 2)}, attrs, 8))
        << op << " gradient";
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

TEST(DeviceWithoutFp64, NormsAndLossesRunInF32) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  const Tensor x = Random(DType::kF32, {4, 5}, 30, -3, 3);
  const Tensor y = Random(DType::kF32, {4, 5}, 31, 0.05, 0.95);
  const Tensor target = Values(DType::kI64, {4}, {0, 4, 2, 1});
  for (const std::string& op : {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                                "binary_cross_entropy_with_logits"}) {
    EXPECT_TRUE(SameOnDevice(device, op, {x, y}, {}, 8)) << op;
    EXPECT_TRUE(SameGradientsOnDevice(device, op, {x, y}, {}, 8)) << op;
  }
  for (const AttrMap& attrs : std::vector<AttrMap>{{}, {{"label_smoothing", 0.1}}}) {
    EXPECT_TRUE(SameOnDevice(device, "cross_entropy", {x, target}, attrs, 8));
    EXPECT_TRUE(SameGradientsOnDevice(device, "cross_entropy", {x, target}, attrs, 8));
  }
  const AttrMap ln = {{"normalized_shape", std::vector<int64_t>{5}}};
  EXPECT_TRUE(SameOnDevice(device, "layer_norm", {x}, ln, 8));
  EXPECT_TRUE(SameGradientsOnDevice(device, "layer_norm", {x}, ln, 8));
  for (const std::string& op : {"softmax", "log_softmax"}) {
    EXPECT_TRUE(SameGradientsOnDevice(device, op, {x}, {{"dim", int64_t{1}}}, 8)) << op;
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

// One long sum, where a plain float accumulator loses digits: 2^20 values near 0.1 summed by
// one work item drift by about 1e-3 relative; compensated, they match the CPU's double sum
// rounded to f32 within a few ulps.
TEST(DeviceWithoutFp64, LongSumsAreCompensated) {
  TENSORD_REQUIRE_DEVICE(device);
  const Tensor x = Random(DType::kF32, {1 << 20}, 40, 0.09, 0.11);
  auto on_device = DeviceDispatcher().Call("sum", {MoveTo(x, device)}, {}, CallEnv{});
  ASSERT_TRUE(on_device.ok()) << on_device.status();
  auto on_cpu = DeviceDispatcher().Call("sum", {x}, {}, CallEnv{});
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  const double got = MoveTo((*on_device)[0], kHostDevice).ToDoubles()[0];
  const double want = (*on_cpu)[0].ToDoubles()[0];
  EXPECT_NEAR(got, want, 4e-7 * want);
  auto mean = DeviceDispatcher().Call("mean", {MoveTo(x, device)}, {}, CallEnv{});
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_NEAR(MoveTo((*mean)[0], kHostDevice).ToDoubles()[0], want / (1 << 20),
              4e-7 * want / (1 << 20));
}

}  // namespace
}  // namespace tensord::testing
