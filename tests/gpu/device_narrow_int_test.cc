// u8, i8 and i16 on the accelerator device: casts, the storage kernels that move their bytes as
// they are (copies, views, selections, fills, assign), and ops the dispatcher computes in i32,
// each compared with the CPU (same dtype, same values: integers compare exactly).
#include <gtest/gtest.h>

#include "server/core/status.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;

const DType kNarrow[] = {DType::kU8, DType::kI8, DType::kI16};

AttrMap To(DType d) { return {{"dtype", std::string(DTypeName(d))}}; }

TEST(DeviceNarrowInt, CastsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  const Tensor f = Values(DType::kF32, {6}, {-1.5, 300.7, -200.2, 0.0, 127.9, 65535.0});
  const Tensor big = Values(DType::kI64, {4}, {257, -1, 70000, -32769});
  for (DType narrow : kNarrow) {
    const std::string what(DTypeName(narrow));
    EXPECT_TRUE(SameOnDevice(device, "to_dtype", {f}, To(narrow))) << what;
    EXPECT_TRUE(SameOnDevice(device, "to_dtype", {big}, To(narrow))) << what;
    const Tensor n = CastTo(Values(DType::kF64, {5}, {0, 1, 2, 100, 7}), narrow);
    for (DType other : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool,
                        DType::kBF16, DType::kF16, DType::kU8, DType::kI8, DType::kI16}) {
      EXPECT_TRUE(SameOnDevice(device, "to_dtype", {n}, To(other)))
          << what << " -> " << DTypeName(other);
    }
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

TEST(DeviceNarrowInt, StorageKernelsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (DType narrow : kNarrow) {
    const std::string what(DTypeName(narrow));
    const Tensor a = CastTo(Values(DType::kF64, {2, 3}, {0, 5, 0, 7, 100, 1}), narrow);
    EXPECT_TRUE(
        SameOnDevice(device, "transpose", {a}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}}))
        << what;
    EXPECT_TRUE(SameOnDevice(device, "reshape", {a}, {{"shape", std::vector<int64_t>{3, 2}}}))
        << what;
    EXPECT_TRUE(SameOnDevice(device, "contiguous", {a})) << what;
    EXPECT_TRUE(SameOnDevice(device, "cat", {a, a}, {{"dim", int64_t{1}}})) << what;
    EXPECT_TRUE(SameOnDevice(device, "nonzero", {a})) << what;
    EXPECT_TRUE(SameOnDevice(device, "masked_select",
                             {a, Values(DType::kBool, {2, 3}, {1, 0, 1, 1, 0, 0})}))
        << what;
    EXPECT_TRUE(SameOnDevice(device, "index_select", {a, Values(DType::kI64, {2}, {2, 0})},
                             {{"dim", int64_t{1}}}))
        << what;
    EXPECT_TRUE(SameOnDevice(device, "zeros_like", {a})) << what;
    EXPECT_TRUE(SameOnDevice(device, "full_like", {a}, {{"value", -1.0}})) << what;
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

TEST(DeviceNarrowInt, ComputedOpsWrapAsOnTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (DType narrow : kNarrow) {
    const std::string what(DTypeName(narrow));
    const Tensor a = CastTo(Values(DType::kI64, {4}, {250, 3, -128, 127}), narrow);
    const Tensor b = CastTo(Values(DType::kI64, {4}, {10, 5, -1, 2}), narrow);
    for (const char* op : {"add", "sub", "mul", "maximum", "bitwise_xor", "eq", "lt"}) {
      EXPECT_TRUE(SameOnDevice(device, op, {a, b})) << op << " " << what;
    }
    for (const char* op : {"neg", "abs", "bitwise_not", "sign"}) {
      EXPECT_TRUE(SameOnDevice(device, op, {a})) << op << " " << what;
    }
    EXPECT_TRUE(SameOnDevice(device, "add", {a, IntOperand(300)})) << what;
    EXPECT_TRUE(SameOnDevice(device, "sum", {a})) << what;
    EXPECT_TRUE(SameOnDevice(device, "cumsum", {a}, {{"dim", int64_t{0}}})) << what;
    EXPECT_TRUE(SameOnDevice(device, "amax", {a}, {{"dim", std::vector<int64_t>{0}}})) << what;
    EXPECT_TRUE(SameOnDevice(device, "where", {Values(DType::kBool, {4}, {1, 0, 0, 1}), a, b}))
        << what;
  }
  // u8 with i8 promotes to i16 on the device too.
  EXPECT_TRUE(SameOnDevice(
      device, "add", {Values(DType::kU8, {2}, {200, 1}), Values(DType::kI8, {2}, {-1, -100})}));
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

}  // namespace
}  // namespace tensord
