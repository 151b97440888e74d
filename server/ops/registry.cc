#include "server/ops/registry.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/core/status.h"
#include "server/ops/elementwise_fusion.h"
#include "server/ops/fusion.h"
#include "server/ops/op_names.h"

namespace tensord {

const char* MarkingName(Marking m) {
  switch (m) {
    case Marking::kDifferentiable:
      return "differentiable";
    case Marking::kZeroGrad:
      return "zero_grad";
    case Marking::kNonDifferentiable:
      return "non_differentiable";
    case Marking::kUnmarked:
      return "unmarked";
  }
  return "unmarked";
}

absl::StatusOr<Tensor> OpRunner::Run1(const std::string& op, std::vector<Tensor> inputs,
                                      AttrMap attrs) {
  ASSIGN_OR_RETURN(std::vector<Tensor> out, Run(op, std::move(inputs), std::move(attrs)));
  return std::move(out.at(0));
}

const OpRegistry& OpRegistry::Builtin() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterCreationOps(*r);
    RegisterElementwiseOps(*r);
    RegisterActivationOps(*r);
    RegisterReductionOps(*r);
    RegisterShapeOps(*r);
    RegisterLinalgOps(*r);
    RegisterNnOps(*r);
    RegisterLossOps(*r);
    RegisterOptimizerOps(*r);
    RegisterCollectiveOps(*r);
    fusion::RegisterFusionOps(*r);  // copies the producers' entries
    fusion::RegisterElementwiseFusionOp(*r);
    // Rules run these by name: a listed name that is no op stops the server here, at start-up.
    std::vector<std::string> unknown = r->UnknownOpsRunByName();
    if (!unknown.empty()) {
      std::fprintf(stderr, "tensord: internal error: ops run by name are not registered: %s\n",
                   absl::StrJoin(unknown, ", ").c_str());
      std::abort();
    }
    int id = 0;
    for (auto& [name, def] : r->ops_) def->id = id++;
    return r;
  }();
  return *registry;
}

int OpRegistry::BuiltinId(const std::string& name) {
  const auto& ops = Builtin().ops_;
  auto it = ops.find(name);
  return it == ops.end() ? kNotBuiltin : it->second->id;
}

int OpRegistry::BuiltinCount() { return static_cast<int>(Builtin().ops_.size()); }

std::vector<std::string> OpRegistry::UnknownOpsRunByName() const {
  std::vector<std::string> unknown;
#define TENSORD_CHECK_OP_RUN_BY_NAME(name) \
  if (!ops_.count(#name)) unknown.push_back(#name);
  TENSORD_OPS_RUN_BY_NAME(TENSORD_CHECK_OP_RUN_BY_NAME)
#undef TENSORD_CHECK_OP_RUN_BY_NAME
  return unknown;
}

absl::StatusOr<const OpDef*> OpRegistry::Find(const std::string& name) const {
  auto it = ops_.find(name);
  if (it == ops_.end()) {
    return Error(Reason::kUnknownOp, absl::StrCat("registry: unknown op '", name, "'"),
                 {{"op", name}});
  }
  return it->second.get();
}

std::vector<const OpDef*> OpRegistry::All() const {
  std::vector<const OpDef*> out;
  for (const auto& [name, def] : ops_) out.push_back(def.get());
  return out;
}

absl::Status OpRegistry::Add(OpDef def) {
  if (ops_.count(def.name)) {
    return absl::InvalidArgumentError(absl::StrCat("registry: op '", def.name,
                                                   "' is already registered (origin ",
                                                   ops_[def.name]->origin, ")"));
  }
  if (!def.infer && !def.composite && !def.collective_infer) {
    return absl::InvalidArgumentError(
        absl::StrCat("registry: op '", def.name, "' has neither a shape rule nor a composite"));
  }
  if (!def.composite_form != !def.composite_form_when) {
    return absl::InvalidArgumentError(absl::StrCat(
        "registry: op '", def.name, "' has a composite form without its condition or back"));
  }
  if (def.marking == Marking::kDifferentiable && !def.backward && !def.composite) {
    return absl::InvalidArgumentError(
        absl::StrCat("registry: op '", def.name, "' is marked differentiable without a rule"));
  }
  // A copy of a built-in op keeps its id; a renamed copy is another op, which must not find
  // the built-in one's kernels.
  if (def.id != kNotBuiltin && BuiltinId(def.name) != def.id) def.id = kNotBuiltin;
  std::string name = def.name;
  ops_[name] = std::make_unique<OpDef>(std::move(def));
  return absl::OkStatus();
}

}  // namespace tensord

namespace tensord {
void MustAdd(OpRegistry& r, OpDef def) {
  absl::Status s = r.Add(std::move(def));
  if (!s.ok()) {
    std::fprintf(stderr, "tensord: %s\n", std::string(s.message()).c_str());
    std::abort();
  }
}
}  // namespace tensord
