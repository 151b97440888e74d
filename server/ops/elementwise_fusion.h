// Fused elementwise expressions: a tree of pointwise calls (arithmetic with broadcasting,
// activations, math functions) whose intermediate values nobody else reads becomes one call of
// the internal op `fused_elementwise`, which computes the whole expression in one pass over its
// output. Programs form it when they are compiled (server/service/program_elementwise_fusion.cc);
// a backend that has a kernel for it computes exactly what the calls it replaces computed.
//
// Its inputs are the expression's leaves; its attribute `steps` is the expression in postfix,
// comma-separated: `$k` pushes input k, a function name pops its operands and pushes its result:
//   "$0,$1,mul,$2,add,relu"      relu(x0 * x1 + x2)
// A function with parameters writes them after colons, as exact decimals: "add:2" (alpha),
// "sub:1", "leaky_relu:0.01", "elu:1", "clamp:-1:inf".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/ops/attrs.h"
#include "server/ops/op_def.h"

namespace tensord {
class OpRegistry;
}  // namespace tensord

namespace tensord::fusion {

inline constexpr const char* kElementwiseOp = "fused_elementwise";
inline constexpr const char* kStepsAttr = "steps";
// The most values an expression holds at once while it is evaluated: a kernel keeps one tile
// buffer per value.
inline constexpr int kMaxStackDepth = 8;

enum class Fn {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMaximum,
  kMinimum,
  kNeg,
  kAbs,
  kSquare,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kReciprocal,
  kRelu,
  kSigmoid,
  kTanh,
  kSilu,
  kGelu,
  kGeluTanh,
  kLeakyRelu,
  kElu,
  kClamp,
};

struct Step {
  bool input = false;  // pushes input `index`; otherwise applies `fn`
  int index = 0;
  Fn fn = Fn::kAdd;
  // add/sub: alpha; leaky_relu: negative_slope; elu: alpha; clamp: a = min, b = max (±inf
  // where the call gave no bound).
  double a = 0, b = 0;
};

int Arity(Fn fn);  // 1 or 2
// The op a function stands for ("gelu" for both gelus), and that op's attributes for `step`.
const char* OpOf(Fn fn);
AttrMap StepAttrs(const Step& step);
// The step of a call of the op named `op` with its validated attributes; false when the call
// cannot be one (another op, a rounding division).
bool StepOf(const std::string& op, const Attrs& attrs, Step* step);

std::string FormatSteps(const std::vector<Step>& steps);
// Parses and checks an expression over `inputs` inputs: every input index in range, every
// function given its operands, one value left, at most kMaxStackDepth values at once.
absl::StatusOr<std::vector<Step>> ParseSteps(const std::string& text, size_t inputs);
// ParseSteps through a small cache per thread: a program's fused call, run again and again,
// parses its expression once per server thread.
absl::StatusOr<std::shared_ptr<const std::vector<Step>>> CachedSteps(const std::string& text,
                                                                     size_t inputs);
// The most values the expression holds at once.
int StackDepth(const std::vector<Step>& steps);

// The backward rule (elementwise_fusion_gradient.cc): recomputes the values between the inputs
// and the output with the ops the steps stand for, and runs their own rules from the root down.
absl::StatusOr<std::vector<Tensor>> ElementwiseBackward(const GradContext& g);

// Registers fused_elementwise.
void RegisterElementwiseFusionOp(OpRegistry& r);

}  // namespace tensord::fusion
