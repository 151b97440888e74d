// NCCL as the collectives library of a CUDA device (server/core/device_collectives.h). Its
// communicators are made non-blocking, so that a peer that never comes or dies while the data
// moves is a typed error once the group's timeout has passed (the communicator aborted), never
// a hang. Each call is enqueued on the calling thread's CUDA stream of the device, after the
// work that wrote its tensors, and waited for.
#pragma once

#include <memory>

#include "server/core/device_collectives.h"

namespace tensord::cuda {

class CudaDevice;

// NCCL's collectives on `device`, or null when NCCL cannot be loaded or TENSORD_NCCL is "off"
// (process groups then move host copies of the device's tensors).
std::unique_ptr<DeviceCollectives> MakeNcclCollectives(CudaDevice& device);

}  // namespace tensord::cuda
