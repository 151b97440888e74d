#include "server/service/program_call_graph.h"

namespace tensord {

CallGraph::CallGraph(ProgramSpec& spec) {
  for (CallSpec& c : spec.calls) calls.push_back(&c);
  n_forward = calls.size();
  for (CallSpec& c : spec.updates) calls.push_back(&c);
  external.resize(calls.size());
  for (size_t k = 0; k < calls.size(); ++k) {
    const CallSpec& c = *calls[k];
    external[k] = c.keep || c.fetch || c.requires_grad;
    if (c.folded_into >= 0) continue;  // runs no more: reads nothing
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (const auto* o = std::get_if<OperandSpec::CallOutput>(&c.inputs[i].source)) {
        uses[{o->call, o->output}].push_back({k, i});
      }
    }
  }
  for (const auto& root : spec.roots) {
    if (root.call < external.size()) external[root.call] = true;
  }
}

const CallUse* CallGraph::OnlyUse(size_t call) const {
  auto it = uses.find({call, 0});
  if (it == uses.end() || it->second.size() != 1) return nullptr;
  return &it->second[0];
}

std::optional<TensorMeta> OperandMeta(const OperandSpec& operand,
                                      const std::vector<std::vector<TensorMeta>>& metas,
                                      const std::vector<ParameterType>& parameters,
                                      Session& session, const std::string& device) {
  const auto& src = operand.source;
  if (const auto* o = std::get_if<OperandSpec::CallOutput>(&src)) {
    if (o->call >= metas.size() || o->output >= metas[o->call].size()) return std::nullopt;
    return metas[o->call][o->output];
  }
  if (const auto* p = std::get_if<OperandSpec::Parameter>(&src)) {
    if (p->index >= parameters.size() || parameters[p->index].number) return std::nullopt;
    return TensorMeta{parameters[p->index].dtype, parameters[p->index].shape, false, device};
  }
  if (const auto* l = std::get_if<OperandSpec::Literal>(&src)) {
    return TensorMeta{l->dtype, l->shape, false, device};
  }
  uint64_t handle = 0;
  if (const auto* h = std::get_if<OperandSpec::Handle>(&src)) handle = h->handle;
  if (const auto* g = std::get_if<OperandSpec::Gradient>(&src)) handle = g->leaf;
  if (handle == 0) return std::nullopt;
  absl::StatusOr<Tensor> t = session.Get(handle);
  if (!t.ok()) return std::nullopt;
  return t->meta();
}

bool Writes(const Dispatcher& dispatcher, const CallSpec& c) {
  const OpDef* def = c.def;
  if (def == nullptr) {
    absl::StatusOr<const OpDef*> found = dispatcher.registry().Find(c.op);
    if (!found.ok()) return true;
    def = *found;
  }
  return def->in_place || !def->mutates_inputs.empty();
}

}  // namespace tensord
