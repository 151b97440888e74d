// fused_elementwise (elementwise_fusion.h): the expression language its `steps` attribute
// speaks, and its table entry.
#include "server/ops/elementwise_fusion.h"

#include <cmath>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/core/status.h"
#include "server/ops/op_helpers.h"
#include "server/ops/registry.h"

namespace tensord::fusion {
namespace {

using namespace ops;

struct FnEntry {
  Fn fn;
  const char* name;  // in `steps`
  const char* op;    // the pointwise op it stands for
  int arity;
  int params;
};
constexpr FnEntry kFns[] = {
    {Fn::kAdd, "add", "add", 2, 1},
    {Fn::kSub, "sub", "sub", 2, 1},
    {Fn::kMul, "mul", "mul", 2, 0},
    {Fn::kDiv, "div", "div", 2, 0},
    {Fn::kMaximum, "maximum", "maximum", 2, 0},
    {Fn::kMinimum, "minimum", "minimum", 2, 0},
    {Fn::kNeg, "neg", "neg", 1, 0},
    {Fn::kAbs, "abs", "abs", 1, 0},
    {Fn::kSquare, "square", "square", 1, 0},
    {Fn::kExp, "exp", "exp", 1, 0},
    {Fn::kLog, "log", "log", 1, 0},
    {Fn::kSqrt, "sqrt", "sqrt", 1, 0},
    {Fn::kRsqrt, "rsqrt", "rsqrt", 1, 0},
    {Fn::kReciprocal, "reciprocal", "reciprocal", 1, 0},
    {Fn::kRelu, "relu", "relu", 1, 0},
    {Fn::kSigmoid, "sigmoid", "sigmoid", 1, 0},
    {Fn::kTanh, "tanh", "tanh", 1, 0},
    {Fn::kSilu, "silu", "silu", 1, 0},
    {Fn::kGelu, "gelu", "gelu", 1, 0},
    {Fn::kGeluTanh, "gelu_tanh", "gelu", 1, 0},
    {Fn::kLeakyRelu, "leaky_relu", "leaky_relu", 1, 1},
    {Fn::kElu, "elu", "elu", 1, 1},
    {Fn::kClamp, "clamp", "clamp", 1, 2},
};

const FnEntry& Entry(Fn fn) { return kFns[static_cast<int>(fn)]; }

std::string Exact(double v) { return absl::StrFormat("%.17g", v); }

absl::Status StepsError(const std::string& what) {
  return AttrError(kElementwiseOp, kStepsAttr, what);
}

}  // namespace

int Arity(Fn fn) { return Entry(fn).arity; }
const char* OpOf(Fn fn) { return Entry(fn).op; }

AttrMap StepAttrs(const Step& step) {
  switch (step.fn) {
    case Fn::kAdd:
    case Fn::kSub:
      return {{"alpha", step.a}};
    case Fn::kLeakyRelu:
      return {{"negative_slope", step.a}};
    case Fn::kElu:
      return {{"alpha", step.a}};
    case Fn::kGeluTanh:
      return {{"approximate", std::string("tanh")}};
    case Fn::kClamp: {
      AttrMap m;
      if (std::isfinite(step.a)) m["min"] = step.a;
      if (std::isfinite(step.b)) m["max"] = step.b;
      return m;
    }
    default:
      return {};
  }
}

bool StepOf(const std::string& op, const Attrs& attrs, Step* step) {
  const double inf = std::numeric_limits<double>::infinity();
  for (const FnEntry& e : kFns) {
    if (op != e.op) continue;
    step->input = false;
    step->fn = e.fn;
    switch (e.fn) {
      case Fn::kAdd:
      case Fn::kSub:
      case Fn::kElu:
        step->a = attrs.GetFloat("alpha");
        return true;
      case Fn::kLeakyRelu:
        step->a = attrs.GetFloat("negative_slope");
        return true;
      case Fn::kDiv:
        return !attrs.Has("rounding_mode") || attrs.GetString("rounding_mode").empty();
      case Fn::kGelu:
        if (attrs.GetString("approximate") == "tanh") step->fn = Fn::kGeluTanh;
        return true;
      case Fn::kClamp:
        // A bound of ±inf would read back as no bound: the same clamp either way.
        step->a = attrs.Has("min") ? attrs.GetFloat("min") : -inf;
        step->b = attrs.Has("max") ? attrs.GetFloat("max") : inf;
        return !std::isnan(step->a) && !std::isnan(step->b);
      default:
        return true;
    }
  }
  return false;
}

std::string FormatSteps(const std::vector<Step>& steps) {
  return absl::StrJoin(steps, ",", [](std::string* out, const Step& s) {
    if (s.input) {
      absl::StrAppend(out, "$", s.index);
      return;
    }
    const FnEntry& e = Entry(s.fn);
    out->append(e.name);
    if (e.params >= 1) absl::StrAppend(out, ":", Exact(s.a));
    if (e.params >= 2) absl::StrAppend(out, ":", Exact(s.b));
  });
}

int StackDepth(const std::vector<Step>& steps) {
  int depth = 0, most = 0;
  for (const Step& s : steps) {
    depth += s.input ? 1 : 1 - Arity(s.fn);
    most = std::max(most, depth);
  }
  return most;
}

absl::StatusOr<std::vector<Step>> ParseSteps(const std::string& text, size_t inputs) {
  std::vector<Step> steps;
  int depth = 0;
  for (absl::string_view token : absl::StrSplit(text, ',')) {
    Step s;
    if (absl::ConsumePrefix(&token, "$")) {
      int index = -1;
      if (!absl::SimpleAtoi(token, &index) || index < 0 || static_cast<size_t>(index) >= inputs) {
        return StepsError(absl::StrCat("'$", token, "' names no input of ", inputs));
      }
      s.input = true;
      s.index = index;
      ++depth;
    } else {
      std::vector<absl::string_view> parts = absl::StrSplit(token, ':');
      const FnEntry* found = nullptr;
      for (const FnEntry& e : kFns) {
        if (parts[0] == e.name) found = &e;
      }
      if (found == nullptr || static_cast<int>(parts.size()) != 1 + found->params) {
        return StepsError(absl::StrCat("'", token, "' is no function of the expression"));
      }
      s.fn = found->fn;
      double* params[] = {&s.a, &s.b};
      for (int i = 0; i < found->params; ++i) {
        if (!absl::SimpleAtod(parts[1 + i], params[i])) {
          return StepsError(absl::StrCat("'", token, "' has a parameter that is no number"));
        }
      }
      if (depth < found->arity) {
        return StepsError(absl::StrCat("'", token, "' lacks an operand"));
      }
      depth += 1 - found->arity;
    }
    if (depth > kMaxStackDepth) {
      return StepsError(absl::StrCat("holds more than ", kMaxStackDepth, " values at once"));
    }
    steps.push_back(s);
  }
  if (depth != 1) return StepsError(absl::StrCat("leaves ", depth, " values, not one"));
  return steps;
}

absl::StatusOr<std::shared_ptr<const std::vector<Step>>> CachedSteps(const std::string& text,
                                                                     size_t inputs) {
  constexpr size_t kMaxEntries = 256;
  thread_local absl::flat_hash_map<std::string, std::shared_ptr<const std::vector<Step>>> cache;
  std::string key = absl::StrCat(inputs, "|", text);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  ASSIGN_OR_RETURN(std::vector<Step> steps, ParseSteps(text, inputs));
  if (cache.size() >= kMaxEntries) cache.clear();
  auto parsed = std::make_shared<const std::vector<Step>>(std::move(steps));
  cache.emplace(std::move(key), parsed);
  return parsed;
}

void RegisterElementwiseFusionOp(OpRegistry& r) {
  OpDef d = NewInternalOp(kElementwiseOp, "elementwise", {"inputs"}, kFloat);
  d.max_inputs = kVariadic;
  d.promote_from = 0;  // number operands take the tensors' dtype, as in the calls it replaces
  d.widen_storage_dtypes = false;
  d.marking = Marking::kDifferentiable;
  d.backward = ElementwiseBackward;
  d.attrs.push_back(StringAttr(kStepsAttr, ""));
  d.doc =
      "a tree of pointwise calls computed in one pass over its output (formed by programs; "
      "not callable)";
  d.infer = [](absl::Span<const TensorMeta> in,
               const Attrs& attrs) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(std::vector<Step> steps, ParseSteps(attrs.GetString(kStepsAttr), in.size()));
    for (const TensorMeta& m : in) {
      if (m.dtype != in[0].dtype) {
        return DtypeError(kElementwiseOp, absl::StrCat("inputs of ", DTypeName(in[0].dtype),
                                                       " and ", DTypeName(m.dtype)));
      }
    }
    std::vector<Shape> stack;
    for (const Step& s : steps) {
      if (s.input) {
        stack.push_back(in[s.index].shape);
        continue;
      }
      if (Arity(s.fn) == 1) continue;
      Shape b = std::move(stack.back());
      stack.pop_back();
      absl::StatusOr<Shape> joined = BroadcastShapes(stack.back(), b);
      if (!joined.ok()) {
        return ShapeError(kElementwiseOp, absl::StrCat(ShapeToString(stack.back()), " and ",
                                                       ShapeToString(b), " are not broadcastable"));
      }
      stack.back() = *std::move(joined);
    }
    return std::vector<TensorMeta>{{in[0].dtype, stack.back()}};
  };
  MustAdd(r, std::move(d));
}

}  // namespace tensord::fusion
