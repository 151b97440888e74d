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
  absl::StrAppend(&s, d.kernel, " ", k.name, "(", d.global, " ", StorageType(d, k.dtype), "* out");
  auto by_value = [&k](size_t i) { return i < k.by_value.size() && k.by_value[i]; };
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    if (by_value(i)) {
      absl::StrAppend(&s, ", const ", StorageType(d, k.inputs[i]), " in", i);
    } else {
      absl::StrAppend(&s, ", ", d.global, " const ", StorageType(d, k.inputs[i]), "* in", i);
    }
  }
  absl::StrAppend(&s, ", ", d.global, " const ", d.int64, "* geom, const ", d.int64,
                  " n, const int rank");
  for (size_t j = 0; j < k.steps.size(); ++j) {
    for (size_t m = 0; k.steps[j].input < 0 && m < k.steps[j].expr.scalars.size(); ++m) {
      absl::StrAppend(&s, ", const T p", j, "_", m);
    }
  }
  absl::StrAppend(&s, ") {\n  const ", d.int64, " i = ", d.global_id, ";\n  if (i >= n) return;\n");
  std::vector<std::string> offsets, strides;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    offsets.push_back(absl::StrCat("o", i));
    strides.push_back(absl::StrCat("geom[rank * ", i + 1, " + "));
    absl::StrAppend(&s, "  ", d.int64, " o", i, " = 0;\n");
  }
  if (!k.inputs.empty()) absl::StrAppend(&s, OffsetLoop("i", "rank", "geom[", offsets, strides, d));
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const std::string element =
        by_value(i) ? absl::StrCat("in", i) : absl::StrCat("in", i, "[o", i, "]");
    absl::StrAppend(&s, "  const T x", i, " = (T)(", Load(k.inputs[i], element), ");\n");
  }
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
