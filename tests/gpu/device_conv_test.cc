// The three ways a GPU device runs a convolution, each against the CPU backend: through the
// vendor's convolution library where the device has one (cuDNN on CUDA, conv_library.h); through
// the device's GEMM (conv_gemm.h) with its columns in chunks of one or two images, so that a
// chunk's GEMMs start inside the tensors and the weight gradient adds up over chunks; and the
// direct kernels (conv_source.h), which the GEMM path replaced for the dtypes the device's GEMM
// takes and which a session without room for the columns gets. Every convolution case of
// NnOpCases (groups, strides, dilation, padding, transposed, 1-d to 3-d, unbatched, an empty
// batch) and batches of five with groups, forward in f32 and f64 and gradients in f64.
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/backends/gpu/conv_gemm.h"
#include "server/backends/gpu/conv_library.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

using Ints = std::vector<int64_t>;

std::vector<ShapedCase> ConvCases() {
  std::vector<ShapedCase> cases;
  for (const ShapedCase& c : NnOpCases()) {
    if (absl::StartsWith(c.op, "conv")) cases.push_back(c);
  }
  cases.push_back({"conv2d",
                   {{5, 6, 6, 5}, {4, 3, 3, 2}, {4}},
                   {{"groups", int64_t{2}}, {"padding", Ints{1, 1}}, {"stride", Ints{1, 2}}}});
  cases.push_back({"conv2d", {{5, 3, 7, 6}, {8, 3, 3, 3}, {8}}, {{"padding", Ints{2}}}});
  cases.push_back({"conv_transpose2d", {{5, 4, 3, 3}, {4, 2, 3, 3}, {2}}, {{"stride", Ints{2}}}});
  return cases;
}

// Sets how the device's convolutions run for one test, back to the default after it.
class ConvPath {
 public:
  ConvPath(bool library, bool gemm, int64_t columns_bytes) {
    gpu::SetConvThroughLibrary(library);
    gpu::SetConvThroughGemm(gemm, columns_bytes);
  }
  ~ConvPath() {
    gpu::SetConvThroughLibrary(true);
    gpu::SetConvThroughGemm(true);
  }
};

// Whether the device has a convolution library that takes an f32 conv2d: one call, and whether
// it went through the library.
bool HasConvolutionLibrary(const std::string& device) {
  const int64_t before = gpu::ConvLibraryRuns();
  const Tensor x = MoveTo(Random(DType::kF32, {2, 3, 6, 6}, 60, -2, 2), device);
  const Tensor w = MoveTo(Random(DType::kF32, {4, 3, 3, 3}, 61, -2, 2), device);
  CallEnv env;
  env.device = device;
  auto y = DeviceDispatcher().Call("conv2d", {x, w}, {}, env);
  return y.ok() && gpu::ConvLibraryRuns() > before;
}

void ExpectConvolutionsMatchTheCpu(const std::string& device) {
  for (const ShapedCase& c : ConvCases()) {
    const std::string what = absl::StrCat(c.op, " of ", c.inputs[0].size(), "-d input, weight [",
                                          absl::StrJoin(c.inputs[1], ","), "]");
    for (DType dtype : {DType::kF32, DType::kF64}) {
      const std::vector<Tensor> in = RandomInputs(c, dtype, 30);
      // Sums in another order than oneDNN's: a few ulps.
      EXPECT_TRUE(SameOnDevice(device, c.op, in, c.attrs, 8)) << what << " " << DTypeName(dtype);
    }
    EXPECT_TRUE(SameGradientsOnDevice(device, c.op, RandomInputs(c, DType::kF64, 40), c.attrs, 8))
        << what;
  }
}

TEST(DeviceConv, ThroughTheDeviceLibraryMatchesTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  ConvPath path(true, false, 0);
  if (!HasConvolutionLibrary(device)) GTEST_SKIP() << device << " has no convolution library";
  const int64_t before = gpu::ConvLibraryRuns();
  ExpectConvolutionsMatchTheCpu(device);
  // Every case with elements ran through it (forward in two dtypes and both gradients), none
  // fell back to the layer's own passes.
  int64_t with_elements = 0;
  for (const ShapedCase& c : ConvCases()) {
    with_elements += std::find(c.inputs[0].begin(), c.inputs[0].end(), 0) == c.inputs[0].end();
  }
  EXPECT_GE(gpu::ConvLibraryRuns() - before, with_elements * 4);
}

TEST(DeviceConv, ThroughGemmInChunksMatchesTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  // 2 KiB: a chunk of one or two images for every case (at least one image per chunk).
  ConvPath path(false, true, 2048);
  ExpectConvolutionsMatchTheCpu(device);
}

TEST(DeviceConv, DirectKernelsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  ConvPath path(false, false, 0);
  ExpectConvolutionsMatchTheCpu(device);
}

// The columns are charged to the session: one whose quota has room for the output but not for
// them gets the direct kernels, and nothing of the columns stays charged.
TEST(DeviceConv, ASessionWithoutRoomForTheColumnsGetsTheDirectKernels) {
  TENSORD_REQUIRE_DEVICE(device);
  ConvPath path(false, true, 0);
  const Tensor x = Random(DType::kF32, {5, 3, 7, 6}, 50, -2, 2);
  const Tensor w = Random(DType::kF32, {8, 3, 3, 3}, 51, -2, 2);
  const AttrMap attrs = {{"padding", Ints{1}}};
  auto on_cpu = DeviceDispatcher().Call("conv2d", {x, w}, attrs, CallEnv{});
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  // The output, 6,720 bytes, and 1 KiB: one image's columns take 4,536.
  const int64_t output_bytes = (*on_cpu)[0].nbytes();
  auto account = std::make_shared<MemoryAccount>(output_bytes + 1024);
  CallEnv env;
  env.device = device;
  env.account = account;
  auto on_device =
      DeviceDispatcher().Call("conv2d", {MoveTo(x, device), MoveTo(w, device)}, attrs, env);
  ASSERT_TRUE(on_device.ok()) << on_device.status();
  EXPECT_EQ(account->used(), output_bytes);
  const Tolerance tol = ToleranceFor(DType::kF32);
  EXPECT_TRUE(
      AllClose(MoveTo((*on_device)[0], kHostDevice), (*on_cpu)[0], tol.rtol * 8, tol.atol * 8));
}

// The library's workspace is charged to the session too: one whose quota has room for the
// output only still gets its convolution (an algorithm without workspace, or the layer's own
// passes), right, and nothing of a workspace stays charged. Where the device has a library.
TEST(DeviceConv, ASessionWithoutRoomForTheLibrarysWorkspaceGetsItsConvolution) {
  TENSORD_REQUIRE_DEVICE(device);
  ConvPath path(true, false, 0);
  if (!HasConvolutionLibrary(device)) GTEST_SKIP() << device << " has no convolution library";
  const Tensor x = Random(DType::kF32, {16, 32, 28, 28}, 70, -2, 2);
  const Tensor w = Random(DType::kF32, {64, 32, 3, 3}, 71, -2, 2);
  const AttrMap attrs = {{"padding", Ints{1}}};
  auto on_cpu = DeviceDispatcher().Call("conv2d", {x, w}, attrs, CallEnv{});
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  const Tensor dx = MoveTo(x, device), dw = MoveTo(w, device);
  const int64_t output_bytes = (*on_cpu)[0].nbytes();
  auto account = std::make_shared<MemoryAccount>(output_bytes + 1024);
  CallEnv env;
  env.device = device;
  env.account = account;
  auto on_device = DeviceDispatcher().Call("conv2d", {dx, dw}, attrs, env);
  ASSERT_TRUE(on_device.ok()) << on_device.status();
  EXPECT_EQ(account->used(), output_bytes);
  const Tolerance tol = ToleranceFor(DType::kF32);
  EXPECT_TRUE(
      AllClose(MoveTo((*on_device)[0], kHostDevice), (*on_cpu)[0], tol.rtol * 8, tol.atol * 8));
}

}  // namespace
}  // namespace tensord::testing
