// fused_elementwise on the device under test: an expression is one generated kernel whose
// result is, bit for bit, what its steps' calls give one by one on the same device (kernels are
// compiled without contraction), and agrees with the CPU's fused kernel within the device's
// float tolerances. The fused products (fused_linear, fused_matmul, fused_conv2d,
// fused_conv3d) likewise: the producer's call and its post-ops' calls, bit for bit.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/ops/elementwise_fusion.h"
#include "server/ops/fusion.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

// `steps` over `inputs` on `device`: as one fused call, and call by call. Both on the host.
std::optional<std::pair<Tensor, Tensor>> FusedAndStepwise(const std::string& device,
                                                          const std::string& steps,
                                                          const std::vector<Tensor>& inputs) {
  CallEnv env;
  env.no_grad = true;
  env.device = device;
  const std::vector<Tensor> moved = MoveAllTo(inputs, device);
  auto fused =
      DeviceDispatcher().Call(fusion::kElementwiseOp, moved, {{fusion::kStepsAttr, steps}}, env);
  EXPECT_TRUE(fused.ok()) << fused.status();
  auto parsed = fusion::ParseSteps(steps, inputs.size());
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!fused.ok() || !parsed.ok()) return std::nullopt;
  std::vector<Tensor> stack;
  for (const fusion::Step& s : *parsed) {
    if (s.input) {
      stack.push_back(moved[s.index]);
      continue;
    }
    const size_t arity = static_cast<size_t>(fusion::Arity(s.fn));
    std::vector<Tensor> operands(stack.end() - arity, stack.end());
    stack.resize(stack.size() - arity);
    auto out = DeviceDispatcher().Call(fusion::OpOf(s.fn), operands, fusion::StepAttrs(s), env);
    EXPECT_TRUE(out.ok()) << fusion::OpOf(s.fn) << ": " << out.status();
    if (!out.ok()) return std::nullopt;
    stack.push_back((*out)[0]);
  }
  return std::pair{MoveTo((*fused)[0], kHostDevice), MoveTo(stack.back(), kHostDevice)};
}

TEST(DeviceFusion, AnExpressionGivesItsCallsBitsInOneKernel) {
  TENSORD_REQUIRE_DEVICE(device);
  const std::vector<std::string> expressions = {
      // Broadcast operands, a number, arithmetic and relu.
      "$0,$1,sub:1,$2,maximum,$1,mul,relu,$3,add:1",
      // Math functions.
      "$0,$2,div,exp,$1,$1,mul,add:1,log,sqrt,$0,square,rsqrt,reciprocal,minimum",
      // Activations, both gelus.
      "$0,sigmoid,$1,tanh,mul,$2,silu,sub:1,gelu,$0,gelu_tanh,add:1",
      // Functions with parameters.
      "$0,leaky_relu:0.2,elu:0.7,clamp:-0.5:inf,$1,add:2.5,$2,sub:0.5,neg,abs,$3,mul",
  };
  for (DType dtype : {DType::kF32, DType::kF64}) {
    const std::vector<Tensor> inputs = {Random(dtype, {4, 1, 5}, 70, -3, 3),
                                        Random(dtype, {3, 1}, 71, -3, 3),
                                        Random(dtype, {5}, 72, 0.1, 2), ScalarOperand(0.5)};
    for (const std::string& steps : expressions) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " ", steps));
      const auto both = FusedAndStepwise(device, steps, inputs);
      ASSERT_TRUE(both.has_value());
      EXPECT_TRUE(SameBytes(both->first, both->second));
      EXPECT_TRUE(SameOnDevice(device, fusion::kElementwiseOp, inputs,
                               {{fusion::kStepsAttr, steps}}, /*loose=*/8));
    }
  }
  EXPECT_EQ(UnsupportedCalls().count(absl::StrCat(fusion::kElementwiseOp, ":f32")), 0u);
}

// A fused product on `device` and the calls it stands for (the producer, then each post-op),
// both brought to the host.
std::optional<std::pair<Tensor, Tensor>> FusedProductAndCalls(
    const std::string& device, const std::string& producer, const AttrMap& producer_attrs,
    const std::string& post_ops, double alpha, size_t n, const std::vector<Tensor>& inputs) {
  CallEnv env;
  env.no_grad = true;
  env.device = device;
  const std::vector<Tensor> moved = MoveAllTo(inputs, device);
  AttrMap attrs = producer_attrs;
  attrs[fusion::kPostOpsAttr] = post_ops;
  attrs[fusion::kProducerInputsAttr] = static_cast<int64_t>(n);
  attrs[fusion::kAlphaAttr] = alpha;
  auto fused = DeviceDispatcher().Call(fusion::FusedOpName(producer), moved, attrs, env);
  EXPECT_TRUE(fused.ok()) << fused.status();
  auto out = DeviceDispatcher().Call(
      producer, std::vector<Tensor>(moved.begin(), moved.begin() + n), producer_attrs, env);
  EXPECT_TRUE(out.ok()) << out.status();
  auto chain = fusion::ParsePostOps(post_ops);
  if (!fused.ok() || !out.ok() || !chain.ok()) return std::nullopt;
  Tensor value = (*out)[0];
  size_t operand = n;
  for (fusion::PostOp p : *chain) {
    std::vector<Tensor> operands = {value};
    AttrMap post;
    if (p == fusion::PostOp::kAdd) operands.push_back(moved[operand++]);
    if (p == fusion::PostOp::kGeluTanh) post["approximate"] = std::string("tanh");
    if (p == fusion::PostOp::kLeakyRelu) post["negative_slope"] = alpha;
    if (p == fusion::PostOp::kElu) post["alpha"] = alpha;
    auto next = DeviceDispatcher().Call(fusion::PostOpOpName(p), operands, post, env);
    EXPECT_TRUE(next.ok()) << fusion::PostOpName(p) << ": " << next.status();
    if (!next.ok()) return std::nullopt;
    value = (*next)[0];
  }
  return std::pair{MoveTo((*fused)[0], kHostDevice), MoveTo(value, kHostDevice)};
}

TEST(DeviceFusion, AProductAndItsPostOpsGiveTheirCallsBits) {
  TENSORD_REQUIRE_DEVICE(device);
  using Ints = std::vector<int64_t>;
  struct Case {
    std::string producer;
    AttrMap attrs;
    std::vector<Shape> producer_inputs, added;
    std::string post_ops;
    double alpha = 0;
  };
  const AttrMap padded = {{"padding", Ints{1}}};
  const std::vector<Case> cases = {
      {"linear", {}, {{4, 6}, {5, 6}, {5}}, {}, "relu"},
      {"linear", {}, {{4, 6}, {5, 6}}, {{5}}, "add,relu"},
      {"linear", {}, {{4, 6}, {5, 6}, {5}}, {{4, 5}, {}}, "add,add,tanh"},
      {"linear", {}, {{4, 6}, {5, 6}, {5}}, {}, "gelu"},
      {"linear", {}, {{4, 6}, {5, 6}, {5}}, {}, "gelu_tanh"},
      {"linear", {}, {{4, 6}, {5, 6}}, {}, "silu"},
      {"linear", {}, {{4, 6}, {5, 6}}, {}, "sigmoid"},
      {"linear", {}, {{4, 6}, {5, 6}}, {}, "leaky_relu", 0.2},
      {"linear", {}, {{4, 6}, {5, 6}}, {}, "elu", 0.7},
      {"matmul", {}, {{2, 4, 6}, {6, 5}}, {{5}}, "add,gelu"},
      {"conv2d", padded, {{2, 3, 5, 5}, {4, 3, 3, 3}, {4}}, {}, "relu"},
      {"conv2d", padded, {{2, 3, 5, 5}, {4, 3, 3, 3}}, {{4, 1, 1}, {2, 4, 5, 5}}, "add,add,relu"},
      {"conv3d", {}, {{1, 2, 4, 4, 4}, {3, 2, 2, 2, 2}}, {}, "sigmoid"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.producer, " ", c.post_ops));
    std::vector<Tensor> inputs;
    uint32_t seed = 80;
    for (const Shape& shape : c.producer_inputs)
      inputs.push_back(Random(DType::kF32, shape, ++seed));
    for (const Shape& shape : c.added) inputs.push_back(Random(DType::kF32, shape, ++seed));

    const auto both = FusedProductAndCalls(device, c.producer, c.attrs, c.post_ops, c.alpha,
                                           c.producer_inputs.size(), inputs);
    ASSERT_TRUE(both.has_value());
    EXPECT_TRUE(SameBytes(both->first, both->second));
    AttrMap attrs = c.attrs;
    attrs[fusion::kPostOpsAttr] = c.post_ops;
    attrs[fusion::kProducerInputsAttr] = static_cast<int64_t>(c.producer_inputs.size());
    attrs[fusion::kAlphaAttr] = c.alpha;
    EXPECT_TRUE(SameOnDevice(device, fusion::FusedOpName(c.producer), inputs, attrs, /*loose=*/8));
  }
}

}  // namespace
}  // namespace tensord::testing
