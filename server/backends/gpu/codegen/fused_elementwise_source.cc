#include "server/backends/gpu/codegen/fused_elementwise_source.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tensord::gpu {

std::string RenderFusedElementwise(const Dialect& d, const FusedElementwiseKernel& k) {
  std::vector<DType> all = k.inputs;
  all.push_back(k.dtype);
  std::set<std::string> helpers;
  for (const FusedStep& s : k.steps) {
    if (s.input < 0 && !s.expr.helpers.empty()) helpers.insert(s.expr.helpers);
  }
  if (!helpers.empty()) all.push_back(DType::kF64);
  std::string s = Preamble(d, all);
  for (const std::string& h : helpers) s += h;
  absl::StrAppend(&s, "#define T ", ComputeType(d, k.dtype), "\n");
  // One function per step: its expression over a, b and its scalars s0, s1, ...
  const char* operand_names[] = {"a", "b", "c", "d"};
  for (size_t j = 0; j < k.steps.size(); ++j) {
    const FusedStep& step = k.steps[j];
    if (step.input >= 0) continue;
    std::vector<std::string> params;
    for (int a = 0; a < step.expr.arity; ++a) {
      params.push_back(absl::StrCat("const T ", operand_names[a]));
    }
    for (size_t m = 0; m < step.expr.scalars.size(); ++m) {
      params.push_back(absl::StrCat("const T s", m));
    }
    absl::StrAppend(&s, "T td_step", j, "(", absl::StrJoin(params, ", "), ") {\n  return (",
                    step.expr.expr, ");\n}\n");
  }
  absl::StrAppend(&s, d.kernel, " ", k.name, "(", d.global, " ", StorageType(d, k.dtype), "* out",
                  MapInputParams(d, k.inputs, k.by_value));
  for (size_t j = 0; j < k.steps.size(); ++j) {
    for (size_t m = 0; k.steps[j].input < 0 && m < k.steps[j].expr.scalars.size(); ++m) {
      absl::StrAppend(&s, ", const T p", j, "_", m);
    }
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < k.inputs.size(); ++i) names.push_back(absl::StrCat("x", i));
  absl::StrAppend(&s, ") {\n", MapLoads(d, k.inputs, k.by_value, names));
  std::vector<std::string> stack;
  for (size_t j = 0; j < k.steps.size(); ++j) {
    const FusedStep& step = k.steps[j];
    if (step.input >= 0) {
      stack.push_back(absl::StrCat("x", step.input));
      continue;
    }
    std::vector<std::string> args(stack.end() - step.expr.arity, stack.end());
    stack.resize(stack.size() - step.expr.arity);
    for (size_t m = 0; m < step.expr.scalars.size(); ++m) {
      args.push_back(absl::StrCat("p", j, "_", m));
    }
    absl::StrAppend(&s, "  const T v", j, " = td_step", j, "(", absl::StrJoin(args, ", "), ");\n");
    stack.push_back(absl::StrCat("v", j));
  }
  absl::StrAppend(&s, "  out[i] = ", Store(d, k.dtype, stack.back()), ";\n}\n");
  return s;
}

}  // namespace tensord::gpu
