// The data of an agreed collective in host memory, moved by Gloo's algorithms over the
// group's context: the ring for all_reduce and reduce_scatter (bf16 and f16 reduced in f32,
// u8, i8 and i16 in i32, as the CPU kernels compute them), Gloo's all_gather, broadcast,
// reduce and barrier.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "gloo/context.h"
#include "server/distributed/process_group.h"

namespace tensord::distributed {

// Moves the data of `call` (agreed by every rank; its tensors in host memory) tagged `seq`.
// Throws Gloo's exceptions when a peer is lost or late (`timeout`).
void MoveWithGloo(const std::shared_ptr<gloo::Context>& context, const CollectiveCall& call,
                  uint32_t seq, std::chrono::milliseconds timeout);

}  // namespace tensord::distributed
