// Host transfers through pinned staging: a GPU's runtime moves transfers of 64 KiB and more
// through a mapped host buffer of 4 MiB, a chunk at a time. A device whose memory is the
// host's (PoCL) does not, so this test turns staging on (TENSORD_GPU_STAGING=on, set before the
// device opens) to run it on every device: sizes around the threshold and the chunk, there
// and back bit for bit, and kernels reading what was staged.
#include <cstdlib>

#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

const bool kStagingOn = [] { return setenv("TENSORD_GPU_STAGING", "on", 1) == 0; }();

TEST(DeviceStaging, TransfersAroundTheChunkSizeRoundTripBitForBit) {
  TENSORD_REQUIRE_DEVICE(device);
  ASSERT_TRUE(kStagingOn);
  constexpr int64_t kChunk = int64_t{4} << 20;
  // In f32 elements: under the threshold, at it, one chunk, one chunk and a value, several.
  for (int64_t bytes : {int64_t{64 << 10} - 4, int64_t{64 << 10}, kChunk, kChunk + 4,
                        kChunk * 2 + (kChunk / 2) + 12}) {
    SCOPED_TRACE(bytes);
    const Tensor host = Random(DType::kF32, {bytes / 4}, 60, -1e6, 1e6);
    const Tensor there = MoveTo(host, device);
    ASSERT_EQ(there.device(), device);
    EXPECT_TRUE(SameBytes(MoveTo(there, "cpu"), host));
  }
  for (DType dtype : {DType::kF64, DType::kI64, DType::kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor host = Random(dtype, {3, 700001}, 61, -50, 50);
    EXPECT_TRUE(SameBytes(MoveTo(MoveTo(host, device), "cpu"), host));
  }
}

TEST(DeviceStaging, KernelsReadWhatWasStaged) {
  TENSORD_REQUIRE_DEVICE(device);
  ASSERT_TRUE(kStagingOn);
  const Tensor a = Random(DType::kF32, {1500, 1024}, 62, -3, 3);  // 6 MiB: two chunks
  const Tensor b = Random(DType::kF32, {1024}, 63, -3, 3);
  EXPECT_TRUE(SameOnDevice(device, "neg", {a}));
  EXPECT_TRUE(SameOnDevice(device, "add", {a, b}));
  EXPECT_TRUE(SameOnDevice(device, "sum", {a}, {{"dim", std::vector<int64_t>{1}}}, 16));
}

}  // namespace
}  // namespace tensord::testing
