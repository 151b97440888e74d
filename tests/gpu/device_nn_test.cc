// The neural-network ops on the accelerator against the CPU backend: layer_norm, the
// convolutions and the pools (max with ties and NaN, avg with every divisor rule, adaptive),
// forward on every float dtype and gradients (input and parameters) in f64, with empty batches, a
// whole-tensor normalisation, rows of one element, groups, strides, dilation, padding (numbers and
// "same"), ceil_mode, return_indices and unbatched inputs.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

TEST(DeviceNn, NormalisationsConvolutionsAndPoolsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (const ShapedCase& c : NnOpCases()) {
    const std::string what = absl::StrCat(c.op, " case ", &c - &NnOpCases()[0]);
    for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
      const std::vector<Tensor> in = RandomInputs(c, dtype, 10);
      // Sums in another order than oneDNN's f32 kernels: a few ulps.
      EXPECT_TRUE(SameOnDevice(device, c.op, in, c.attrs, 8)) << what << " " << DTypeName(dtype);
    }
    EXPECT_TRUE(SameGradientsOnDevice(device, c.op, RandomInputs(c, DType::kF64, 20), c.attrs, 8))
        << what;
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

// The first maximum of a window wins a tie and a NaN replaces what came before it, in the
// values, the indices and the gradient.
TEST(DeviceNn, MaxPoolTiesAndNanMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  const std::vector<double> v = {1, 3, 3, 0, 2, 3, NAN, 1, 3, 3, 2, 2, 0, 1, 2, 2};
  for (DType dtype : {DType::kF32, DType::kF64}) {
    const Tensor x = Values(dtype, {1, 1, 4, 4}, v);
    const AttrMap attrs = {{"kernel_size", std::vector<int64_t>{2}},
                           {"stride", std::vector<int64_t>{1}},
                           {"return_indices", true}};
    EXPECT_TRUE(SameOnDevice(device, "max_pool2d", {x}, attrs)) << DTypeName(dtype);
    EXPECT_TRUE(SameGradientsOnDevice(device, "max_pool2d", {x}, attrs)) << DTypeName(dtype);
    EXPECT_TRUE(SameGradientsOnDevice(device, "adaptive_max_pool2d", {x},
                                      {{"output_size", std::vector<int64_t>{2, 3}}}))
        << DTypeName(dtype);
  }
}

// batch_norm in training (batch statistics, with and without running statistics to update)
// and in evaluation (the running statistics), forward and gradients.
TEST(DeviceNn, BatchNormMatchesTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (const Shape& shape : {Shape{4, 3, 5, 2}, Shape{6, 3}, Shape{2, 3, 7}}) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      const Tensor x = Random(dtype, shape, 1, -2, 2);
      const Tensor w = Random(dtype, {3}, 2, 0.5, 1.5), b = Random(dtype, {3}, 3, -1, 1);
      const Tensor mean = Random(dtype, {3}, 4, -0.5, 0.5), var = Random(dtype, {3}, 5, 0.5, 2);
      const Tensor none = Random(dtype, {0}, 6);
      const std::string what = absl::StrCat(ShapeToString(shape), " ", DTypeName(dtype));
      const AttrMap train = {{"training", true}, {"momentum", 0.2}, {"eps", 1e-3}};
      const AttrMap eval = {{"training", false}};
      EXPECT_TRUE(SameOnDevice(device, "batch_norm", {x, none, none, w, b}, train, 8)) << what;
      EXPECT_TRUE(SameOnDevice(device, "batch_norm", {x, mean, var, w, b}, train, 8)) << what;
      EXPECT_TRUE(SameOnDevice(device, "batch_norm", {x, mean, var, w, b}, eval, 8)) << what;
      // The running statistics are updated in place on the device as on the CPU.
      Tensor cpu_mean = Run1("clone", {mean}), cpu_var = Run1("clone", {var});
      Tensor dev_mean = MoveTo(mean, device), dev_var = MoveTo(var, device);
      CallEnv env;
      ASSERT_TRUE(
          DeviceDispatcher().Call("batch_norm", {x, cpu_mean, cpu_var, w, b}, train, env).ok());
      ASSERT_TRUE(
          DeviceDispatcher()
              .Call("batch_norm",
                    {MoveTo(x, device), dev_mean, dev_var, MoveTo(w, device), MoveTo(b, device)},
                    train, env)
              .ok());
      const Tolerance tol = ToleranceFor(dtype);
      EXPECT_TRUE(AllClose(MoveTo(dev_mean, kHostDevice), cpu_mean, 8 * tol.rtol, 8 * tol.atol))
          << what;
      EXPECT_TRUE(AllClose(MoveTo(dev_var, kHostDevice), cpu_var, 8 * tol.rtol, 8 * tol.atol))
          << what;
      if (dtype == DType::kF64) {
        EXPECT_TRUE(SameGradientsOnDevice(device, "batch_norm", {x, none, none, w, b}, train, 8))
            << what;
        EXPECT_TRUE(SameGradientsOnDevice(device, "batch_norm", {x, mean, var, w, b}, eval, 8))
            << what;
      }
    }
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

}  // namespace
}  // namespace tensord::testing
