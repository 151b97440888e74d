#include "server/dispatch/device_placement.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/dispatch/dispatcher.h"

namespace tensord {
namespace {

// A number operand (a 0-d tensor in host memory) may join a call on any device: device kernels
// read it as a value, as PyTorch lets a CPU scalar tensor join a CUDA op.
bool IsHostScalar(const Tensor& t) {
  return t.rank() == 0 && (t.storage() == nullptr || t.storage()->on_host());
}

}  // namespace

absl::StatusOr<std::string> CallDevice(const OpDef& def, const std::vector<Tensor>& inputs,
                                       const Attrs& attrs, const CallEnv& env) {
  if (inputs.empty()) {
    return def.creation && attrs.Has("device") ? attrs.GetString("device") : env.device;
  }
  const Tensor* primary = &inputs[0];
  for (const Tensor& t : inputs) {
    if (!IsHostScalar(t)) {
      primary = &t;
      break;
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (t.device() == primary->device() || IsHostScalar(t)) continue;
    const size_t p = static_cast<size_t>(primary - inputs.data());
    return Error(Reason::kDeviceMismatch,
                 absl::StrCat(def.name, ": input ", p, " is on ", primary->device(), " but input ",
                              i, " is on ", t.device(), "; move one with to_device"),
                 {{"op", def.name},
                  {"input_index", absl::StrCat(i)},
                  {"device", primary->device()},
                  {"other_device", t.device()}});
  }
  return primary->device();
}

absl::StatusOr<Tensor> MoveToDevice(const Dispatcher& dispatcher, const Tensor& src,
                                    const std::string& device,
                                    std::shared_ptr<MemoryAccount> account) {
  ASSIGN_OR_RETURN(Backend * to, dispatcher.BackendFor(device));
  ASSIGN_OR_RETURN(Backend * from, dispatcher.BackendFor(src.device()));
  ASSIGN_OR_RETURN(Tensor out, to->Allocate(src.dtype(), src.shape(), device, std::move(account)));
  if (src.nbytes() == 0) return out;
  if (from == to) {
    RETURN_IF_ERROR(to->CopyOnBackend(src, out));
  } else if (src.storage()->on_host()) {
    RETURN_IF_ERROR(to->CopyFromHost(src.raw(), src.nbytes(), out));
  } else if (out.storage()->on_host()) {
    RETURN_IF_ERROR(from->CopyToHost(src, out.raw()));
  } else {
    // Two device backends: through the host. The staging bytes live for this call only, so
    // they are not charged to the session (as a download's staging is not).
    std::string staging(src.nbytes(), '\0');
    RETURN_IF_ERROR(from->CopyToHost(src, staging.data()));
    RETURN_IF_ERROR(to->CopyFromHost(staging.data(), staging.size(), out));
  }
  return out;
}

}  // namespace tensord
