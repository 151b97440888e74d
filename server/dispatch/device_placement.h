// Where a call runs, and to_device: a copy of a tensor on another device, made with the copies
// of the two backends involved (no backend needs to know another).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/tensor.h"
#include "server/ops/op_def.h"

namespace tensord {

class Dispatcher;
struct CallEnv;

// The device a call runs on: its first operand's that is not a number operand (a 0-d tensor in
// host memory, which joins a call on any device); the session's for a creation op, or the one
// its `device` attribute names. DEVICE_MISMATCH when tensor operands are on two devices.
absl::StatusOr<std::string> CallDevice(const OpDef& def, const std::vector<Tensor>& inputs,
                                       const Attrs& attrs, const CallEnv& env);

// A copy of `src` on `device`, charged to `account`. DEVICE_NOT_FOUND for a device the server
// does not have.
absl::StatusOr<Tensor> MoveToDevice(const Dispatcher& dispatcher, const Tensor& src,
                                    const std::string& device,
                                    std::shared_ptr<MemoryAccount> account);

}  // namespace tensord
