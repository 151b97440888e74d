// The dispatcher's path for collective ops. A collective blocks until every rank of the group
// calls it, so a rank must never fail alone: each of this rank's checks (arity, attributes,
// the autodiff rules, device, dtype, shape, quota) becomes a refusal that still meets the
// peers, and the group makes every rank fail with the same reason before any data moves.
#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/dispatch/device_placement.h"
#include "server/dispatch/dispatcher.h"

namespace tensord {

absl::StatusOr<std::vector<Tensor>> Dispatcher::CallCollective(const OpDef& def,
                                                               std::vector<Tensor> inputs,
                                                               const AttrMap& attr_map,
                                                               const CallEnv& env) const {
  const std::string& op = def.name;
  distributed::ProcessGroup* group = env.group.get();
  std::vector<Tensor> plain = inputs;
  for (Tensor& t : plain) t.set_autograd(nullptr);
  std::vector<Tensor> outputs;
  Attrs attrs;
  std::string device = env.device;

  const absl::Status refusal = [&]() -> absl::Status {
    RETURN_IF_ERROR(CheckArity(def, static_cast<int>(inputs.size())));
    ASSIGN_OR_RETURN(attrs, ValidateAttrs(op, def.attrs, attr_map));
    RETURN_IF_ERROR(CheckAutodiff(def, inputs, env));
    std::vector<TensorMeta> metas;
    if (!inputs.empty()) {
      ASSIGN_OR_RETURN(device, CallDevice(def, inputs, attrs, env));
      ASSIGN_OR_RETURN(Backend * backend, BackendFor(device));
      if (group != nullptr && !group->Serves(backend->kind())) {
        return Error(
            Reason::kUnsupportedOnBackend,
            absl::StrCat(op, ": group '", group->name(), "' (", group->backend(),
                         ") cannot take tensors of device ", device, "; move them with to_device"),
            {{"op", op}, {"backend", backend->kind()}, {"device", device}});
      }
      if (!def.dtypes.Contains(inputs[0].dtype())) {
        return Error(Reason::kDtypeMismatch,
                     absl::StrCat(op, ": dtype ", DTypeName(inputs[0].dtype()),
                                  " is not supported (supported: ", def.dtypes.ToString(), ")"),
                     {{"op", op},
                      {"dtype", std::string(DTypeName(inputs[0].dtype()))},
                      {"supported", def.dtypes.ToString()}});
      }
      for (const Tensor& t : plain) metas.push_back(t.meta());
    }
    if (group == nullptr) return absl::OkStatus();
    ASSIGN_OR_RETURN(std::vector<TensorMeta> out_metas,
                     def.collective_infer(metas, attrs, group->size()));
    if (!out_metas.empty()) {
      ASSIGN_OR_RETURN(Backend * backend, BackendFor(device));
      for (const TensorMeta& m : out_metas) {
        ASSIGN_OR_RETURN(Tensor t, backend->Allocate(m.dtype, m.shape, device, env.account));
        outputs.push_back(std::move(t));
      }
    }
    return absl::OkStatus();
  }();

  if (group == nullptr) {
    RETURN_IF_ERROR(refusal);
    return Error(Reason::kGroupNotJoined,
                 absl::StrCat(op, ": this session belongs to no process group; JoinGroup first"),
                 {{"op", op}});
  }
  if (!refusal.ok()) outputs.clear();
  const distributed::CollectiveCall call{
      def, attrs, plain, outputs, device, refusal, env.collective_tag};
  absl::Status run = group->Run(call);
  if (!run.ok()) {
    return WithMetadata(run, {{"op", op},
                              {"group", group->name()},
                              {"rank", absl::StrCat(group->rank())},
                              {"device", device}});
  }
  const bool record =
      !env.no_grad && def.marking == Marking::kDifferentiable &&
      std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.autograd(); });
  if (record) RecordOnContext(def, attrs, inputs, plain, outputs, env);
  return outputs;
}

}  // namespace tensord
