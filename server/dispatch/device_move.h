// to_device: a copy of a tensor on another device, made with the copies of the two backends
// involved (no backend needs to know another).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/core/tensor.h"

namespace tensord {

class Dispatcher;

// A copy of `src` on `device`, charged to `account`. DEVICE_NOT_FOUND for a device the server
// does not have.
absl::StatusOr<Tensor> MoveToDevice(const Dispatcher& dispatcher, const Tensor& src,
                                    const std::string& device,
                                    std::shared_ptr<MemoryAccount> account);

}  // namespace tensord
