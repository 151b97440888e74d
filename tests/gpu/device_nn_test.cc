// The neural-network ops on the accelerator against the CPU backend: the normalisations,
// forward on every float dtype and gradients (input and parameters) in f64, with empty
// batches, a whole-tensor normalisation and rows of one element.
#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

TEST(DeviceNn, NormalisationsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (const ShapedCase& c : NormOpCases()) {
    const std::string what = absl::StrCat(c.op, " case ", &c - &NormOpCases()[0]);
    for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
      std::vector<Tensor> in;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        in.push_back(Random(dtype, c.inputs[i], 10 + i, -2, 2));
      }
      // Sums over a row in another order than oneDNN's f32 kernel: a few ulps.
      EXPECT_TRUE(SameOnDevice(device, c.op, in, c.attrs, 8)) << what << " " << DTypeName(dtype);
    }
    std::vector<Tensor> in;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      in.push_back(Random(DType::kF64, c.inputs[i], 20 + i, -2, 2));
    }
    EXPECT_TRUE(SameGradientsOnDevice(device, c.op, in, c.attrs, 8)) << what;
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

}  // namespace
}  // namespace tensord::testing
