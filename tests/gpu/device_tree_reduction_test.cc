// Work-group tree reductions (gpu/codegen/tree_reduction_source.h) against the CPU backend.
// A GPU folds long groups so; a device whose work items are host cores (PoCL) does not, so
// this test turns them on (TENSORD_GPU_TREE_REDUCTIONS=on, set before the device opens) to
// run them on every device.
#include <cstdlib>
#include <limits>

#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

const bool kTreesOn = [] { return setenv("TENSORD_GPU_TREE_REDUCTIONS", "on", 1) == 0; }();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Long groups (1024 elements and more) are folded by a work group each: sums, means and
// extrema of rows, of columns (strided) and of everything, with NaNs winning the extrema and
// ints and bools summed exactly.
TEST(DeviceReductions, LongGroupsFoldInWorkGroups) {
  TENSORD_REQUIRE_DEVICE(device);
  ASSERT_TRUE(kTreesOn);
  using Ints = std::vector<int64_t>;
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32, DType::kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor rows = Random(dtype, {3, 5000}, 50, -4, 4);
    const Tensor columns = Random(dtype, {1500, 2}, 51, -4, 4);
    const Tensor flat = Random(dtype, {70001}, 52, -4, 4);
    for (const std::string op : {"sum", "mean", "amax", "amin"}) {
      if (op == "mean" && !IsFloat(dtype)) continue;
      if (dtype == DType::kBool && op != "sum") continue;
      EXPECT_TRUE(SameOnDevice(device, op, {rows}, {{"dim", Ints{1}}}, 16)) << op;
      EXPECT_TRUE(SameOnDevice(device, op, {columns}, {{"dim", Ints{0}}}, 16)) << op;
      EXPECT_TRUE(SameOnDevice(device, op, {flat}, {}, 16)) << op;
      EXPECT_TRUE(SameOnDevice(device, op, {rows}, {{"dim", Ints{0, 1}}}, 16)) << op;
    }
  }
  std::vector<double> v(3000, 1.0);
  v[2999] = kNan;
  v[7] = kInf;
  const Tensor with_nan = Values(DType::kF32, {3000}, v);
  for (const std::string op : {"sum", "amax", "amin", "max", "min"}) {
    EXPECT_TRUE(SameOnDevice(device, op, {with_nan}, {})) << op;
  }
}

}  // namespace
}  // namespace tensord::testing
