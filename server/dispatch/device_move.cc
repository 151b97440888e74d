#include "server/dispatch/device_move.h"

#include <string>

#include "server/core/status.h"
#include "server/dispatch/dispatcher.h"

namespace tensord {

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
