// The backward rule of fused_elementwise (elementwise_fusion.h). The fused call keeps no
// intermediate value: its rule recomputes them from its inputs with the pointwise ops the steps
// stand for, then runs those ops' own backward rules from the root down, as the reverse pass
// would have run them for the unfused calls. A fused forward is therefore differentiable
// wherever each of its steps is, and what it saves for the backward is its inputs alone.
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/core/shape.h"
#include "server/core/status.h"
#include "server/ops/elementwise_fusion.h"
#include "server/ops/gradient_sums.h"
#include "server/ops/registry.h"

namespace tensord::fusion {
namespace {

// One value of the expression: an input, or a step's result.
struct Value {
  TensorMeta meta;               // its dtype, shape and device
  Tensor tensor;                 // defined where a rule reads it
  std::vector<size_t> operands;  // positions of a step's operands
  bool needs = false;            // some input below it needs a gradient
  Tensor grad;
};

// What the rules of the steps' ops read besides the incoming gradient (elementwise_arithmetic.cc,
// elementwise_unary.cc, activation_pointwise.cc): add, sub and neg read nothing; mul reads,
// for each operand that needs a gradient, the other one; relu, sigmoid, tanh, exp, sqrt, rsqrt
// and reciprocal read their output alone; every other rule may read its operands and its
// output. A value no rule reads is not recomputed.
bool ReadsOutputOnly(Fn fn) {
  switch (fn) {
    case Fn::kRelu:
    case Fn::kSigmoid:
    case Fn::kTanh:
    case Fn::kExp:
    case Fn::kSqrt:
    case Fn::kRsqrt:
    case Fn::kReciprocal:
      return true;
    default:
      return false;
  }
}

// `other_needs`: the step's other operand (of a binary step) needs a gradient.
bool RuleReadsOperand(Fn fn, bool other_needs) {
  switch (fn) {
    case Fn::kAdd:
    case Fn::kSub:
    case Fn::kNeg:
      return false;
    case Fn::kMul:
      return other_needs;
    default:
      return !ReadsOutputOnly(fn);
  }
}

bool RuleReadsOutput(Fn fn) {
  return fn != Fn::kAdd && fn != Fn::kSub && fn != Fn::kNeg && fn != Fn::kMul;
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> ElementwiseBackward(const GradContext& g) {
  ASSIGN_OR_RETURN(std::shared_ptr<const std::vector<Step>> parsed,
                   CachedSteps(g.attrs.GetString(kStepsAttr), g.inputs.size()));
  const std::vector<Step>& steps = *parsed;
  std::vector<Value> values(steps.size());
  std::vector<const OpDef*> defs(steps.size(), nullptr);
  std::vector<Attrs> attrs(steps.size());
  std::vector<size_t> stack;
  for (size_t p = 0; p < steps.size(); ++p) {
    const Step& s = steps[p];
    Value& v = values[p];
    if (s.input) {
      v.needs = g.needs_input_grad[s.index];
      v.meta = g.inputs[s.index].meta();
      stack.push_back(p);
      continue;
    }
    v.operands.assign(stack.end() - Arity(s.fn), stack.end());
    stack.resize(stack.size() - v.operands.size());
    stack.push_back(p);
    v.meta = g.outputs[0].meta();
    v.meta.shape = {};
    for (size_t q : v.operands) {
      v.needs |= values[q].needs;
      ASSIGN_OR_RETURN(v.meta.shape, BroadcastShapes(v.meta.shape, values[q].meta.shape));
    }
    ASSIGN_OR_RETURN(defs[p], OpRegistry::Builtin().Find(OpOf(s.fn)));
    ASSIGN_OR_RETURN(attrs[p], ValidateAttrs(defs[p]->name, defs[p]->attrs, StepAttrs(s)));
  }
  // The values the rules read, and what recomputes them. The output is given; a step below it
  // is recomputed by its own op from its operands.
  const size_t root = steps.size() - 1;
  std::vector<bool> read(steps.size(), false);
  for (size_t p = steps.size(); p-- > 0;) {
    if (steps[p].input) continue;
    const std::vector<size_t>& operands = values[p].operands;
    if (values[p].needs) {
      for (size_t i = 0; i < operands.size(); ++i) {
        const bool other_needs = operands.size() == 2 && values[operands[1 - i]].needs;
        if (RuleReadsOperand(steps[p].fn, other_needs)) read[operands[i]] = true;
      }
      if (RuleReadsOutput(steps[p].fn)) read[p] = true;
    }
    if (read[p] && p != root) {
      for (size_t q : operands) read[q] = true;
    }
  }
  for (size_t p = 0; p < steps.size(); ++p) {
    Value& v = values[p];
    if (steps[p].input) {
      v.tensor = g.inputs[steps[p].index];
    } else if (p == root) {
      v.tensor = g.outputs[0];
    } else if (read[p]) {
      std::vector<Tensor> operands;
      for (size_t q : v.operands) operands.push_back(values[q].tensor);
      ASSIGN_OR_RETURN(v.tensor, g.run.Run1(defs[p]->name, std::move(operands), attrs[p].map()));
    }
  }
  values[root].grad = g.grad_outputs[0];
  std::vector<Tensor> grads(g.inputs.size());
  // Postfix order puts every step after its operands, so walking it backwards finishes each
  // value's gradient before its own rule runs.
  for (size_t p = steps.size(); p-- > 0;) {
    Value& v = values[p];
    if (!v.needs) continue;
    if (steps[p].input) {
      if (v.grad.defined()) RETURN_IF_ERROR(AccumulateGrad(grads[steps[p].index], v.grad, g.run));
      continue;
    }
    if (!v.grad.defined()) {
      ASSIGN_OR_RETURN(v.grad, ZeroGrad(v.meta, g.run));
    }
    std::vector<Tensor> operands;
    std::vector<bool> needs;
    for (size_t q : v.operands) {
      operands.push_back(values[q].tensor);
      needs.push_back(values[q].needs);
    }
    const Tensor outputs[] = {v.tensor};
    const Tensor grad_outputs[] = {v.grad};
    GradContext rule{operands, outputs, grad_outputs, attrs[p], needs, g.run};
    ASSIGN_OR_RETURN(std::vector<Tensor> operand_grads, defs[p]->backward(rule));
    if (operand_grads.size() != operands.size()) {
      return Error(
          Reason::kInternal,
          absl::StrCat("autodiff: the backward rule of '", defs[p]->name, "' returned ",
                       operand_grads.size(), " gradients for ", operands.size(), " inputs"),
          {{"op", defs[p]->name}});
    }
    for (size_t i = 0; i < operands.size(); ++i) {
      if (!needs[i] || !operand_grads[i].defined()) continue;
      Value& operand = values[v.operands[i]];
      ASSIGN_OR_RETURN(Tensor reduced, ReduceGradTo(operand_grads[i], operand.meta, g.run));
      RETURN_IF_ERROR(AccumulateGrad(operand.grad, std::move(reduced), g.run));
    }
    v.grad = Tensor();
    if (p != root) v.tensor = Tensor();  // no later rule reads a value above its operands
  }
  return grads;
}

}  // namespace tensord::fusion
