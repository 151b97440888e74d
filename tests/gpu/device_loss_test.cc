// The losses built on pointwise parts (l1, binary cross entropy with and without logits,
// smooth l1, huber, kl_div) on the accelerator against the CPU backend: every reduction,
// weights and pos_weight, clamped logs at probabilities 0 and 1, zero targets of kl_div (NaN
// gradients on both), forward in f32/f64 and gradients in f64; a probability outside [0, 1]
// fails as on the CPU.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

struct LossCase {
  std::string op;
  AttrMap attrs;
  int extra = 0;  // weight (1) and pos_weight (2) after input and target
};

std::vector<Tensor> LossInputs(const LossCase& c, DType dtype) {
  const bool probabilities = c.op == "binary_cross_entropy";
  // Probabilities include 0 and 1 exactly (the clamped logs); kl_div's targets include 0.
  Tensor input = probabilities ? Values(dtype, {2, 4}, {0, 0.2, 0.5, 1, 0.9, 0.05, 0.7, 0.33})
                               : Random(dtype, {2, 4}, 1, -2, 2);
  Tensor target = c.op == "kl_div" && !c.attrs.count("log_target")
                      ? Values(dtype, {2, 4}, {0, 0.1, 0.4, 0.2, 0.3, 0, 0.6, 0.9})
                      : Random(dtype, {2, 4}, 2, 0, 1);
  std::vector<Tensor> in = {input, target};
  if (c.extra >= 1) in.push_back(Random(dtype, {4}, 3, 0.5, 2));
  if (c.extra >= 2) in.push_back(Random(dtype, {4}, 4, 0.5, 3));
  return in;
}

TEST(DeviceLosses, PointwiseLossesMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  const std::vector<LossCase> cases = {
      {"l1_loss", {}},
      {"binary_cross_entropy", {}},
      {"binary_cross_entropy", {}, 1},
      {"binary_cross_entropy_with_logits", {}},
      {"binary_cross_entropy_with_logits", {}, 1},
      {"binary_cross_entropy_with_logits", {}, 2},
      {"smooth_l1_loss", {{"beta", 0.5}}},
      {"huber_loss", {{"delta", 0.7}}},
      {"kl_div", {}},
      {"kl_div", {{"log_target", true}}},
  };
  for (const LossCase& c : cases) {
    for (const std::string reduction : {"none", "mean", "sum"}) {
      AttrMap attrs = c.attrs;
      attrs["reduction"] = reduction;
      const std::string what = absl::StrCat(c.op, " ", reduction, " extra ", c.extra);
      for (DType dtype : {DType::kF32, DType::kF64}) {
        EXPECT_TRUE(SameOnDevice(device, c.op, LossInputs(c, dtype), attrs, 4))
            << what << " " << DTypeName(dtype);
      }
      EXPECT_TRUE(SameGradientsOnDevice(device, c.op, LossInputs(c, DType::kF64), attrs, 4))
          << what;
    }
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
  // No probability: the CPU's INVALID_REQUEST, naming the element.
  EXPECT_TRUE(SameOnDevice(
      device, "binary_cross_entropy",
      {Values(DType::kF32, {3}, {0.5, 1.5, 0.2}), Values(DType::kF32, {3}, {1, 0, 1})}));
  EXPECT_TRUE(
      SameOnDevice(device, "binary_cross_entropy",
                   {Values(DType::kF32, {2}, {NAN, 0.5}), Values(DType::kF32, {2}, {1, 0})}));
}

}  // namespace
}  // namespace tensord::testing
