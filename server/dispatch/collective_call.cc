// The dispatcher's path for collective ops. A collective blocks until every rank of the group
// calls it, so a rank must never fail alone: each of this rank's checks (arity, attributes,
// the autodiff rules, device, dtype, shape, quota) becomes a refusal that still meets the
// peers, and the group makes every rank fail with the same reason before any data moves.
// A group moves host bytes, or a device's tensors with the device's own collectives library
// (NCCL on cuda) where it has one that takes the call; otherwise the tensors of a device stage
// through host memory for the call (charged to the session while it runs). Every device takes
// part.
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
  // What the group reads and writes: `plain` and `outputs` themselves (host memory, or the
  // device's library moves them), or their copies in host memory.
  std::vector<Tensor> group_inputs, group_outputs;
  DeviceCollectives* library = nullptr;
  Backend* backend = nullptr;  // the device's
  Attrs attrs;
  std::string device = env.device;

  const absl::Status refusal = [&]() -> absl::Status {
    RETURN_IF_ERROR(CheckArity(def, static_cast<int>(inputs.size())));
    ASSIGN_OR_RETURN(attrs, ValidateAttrs(op, def.attrs, attr_map));
    // The device first, so that every refusal names the tensors' device.
    if (!inputs.empty()) {
      ASSIGN_OR_RETURN(device, CallDevice(def, inputs, attrs, env));
    }
    RETURN_IF_ERROR(CheckAutodiff(def, inputs, env));
    std::vector<TensorMeta> metas;
    if (!inputs.empty()) {
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
    ASSIGN_OR_RETURN(backend, BackendFor(device));
    ASSIGN_OR_RETURN(Backend * host, BackendFor(kHostDevice));
    for (const TensorMeta& m : out_metas) {
      ASSIGN_OR_RETURN(Tensor t, backend->Allocate(m.dtype, m.shape, device, env.account));
      outputs.push_back(std::move(t));
    }
    if (backend != host && !inputs.empty()) {
      const CollectiveKind kind = def.collective;
      const bool reduces = kind == CollectiveKind::kAllReduce ||
                           kind == CollectiveKind::kReduceScatter ||
                           kind == CollectiveKind::kReduce;
      DeviceCollectives* own = backend->Collectives(device);
      if (own != nullptr && own->Takes(inputs[0].dtype(), reduces)) library = own;
    }
    if (backend == host || library != nullptr) {
      group_inputs = plain;
      group_outputs = outputs;
      return absl::OkStatus();
    }
    for (const Tensor& t : plain) {
      ASSIGN_OR_RETURN(Tensor staged, MoveToDevice(*this, t, kHostDevice, env.account));
      group_inputs.push_back(std::move(staged));
    }
    for (const TensorMeta& m : out_metas) {
      ASSIGN_OR_RETURN(Tensor t, host->Allocate(m.dtype, m.shape, kHostDevice, env.account));
      group_outputs.push_back(std::move(t));
    }
    return absl::OkStatus();
  }();

  if (group == nullptr) {
    RETURN_IF_ERROR(refusal);
    return Error(Reason::kGroupNotJoined,
                 absl::StrCat(op, ": this session belongs to no process group; JoinGroup first"),
                 {{"op", op}});
  }
  if (!refusal.ok()) {
    outputs.clear();
    group_inputs.clear();
    group_outputs.clear();
    library = nullptr;
  }
  const distributed::CollectiveCall call{def,    attrs,   group_inputs,       group_outputs,
                                         device, refusal, env.collective_tag, library};
  const Metadata where = {{"op", op},
                          {"group", group->name()},
                          {"rank", absl::StrCat(group->rank())},
                          {"device", device}};
  absl::Status run = group->Run(call);
  if (!run.ok()) return WithMetadata(run, where);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].storage() == group_outputs[i].storage() || outputs[i].nbytes() == 0) continue;
    absl::Status copied =
        backend->CopyFromHost(group_outputs[i].raw(), group_outputs[i].nbytes(), outputs[i]);
    if (!copied.ok()) return WithMetadata(copied, where);
  }
  const bool record =
      !env.no_grad && def.marking == Marking::kDifferentiable &&
      std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.autograd(); });
  if (record) RecordOnContext(def, attrs, inputs, plain, outputs, env);
  return outputs;
}

}  // namespace tensord
