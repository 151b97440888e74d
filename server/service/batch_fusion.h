// Fusion inside an Execute batch: a matrix product or convolution whose output only feeds a
// chain of pointwise post-ops (adds of a bias or a residual, one activation) runs as one call
// of the fused op (server/ops/fusion.h), as compiled programs do (program_fusion.h). A batch is
// not typed before it runs, so the chains are found from the calls alone and decided when the
// batch reaches them: the fused call runs at the product's place, and where it cannot run (no
// kernel for these dtypes and shapes, operands that do not fit the product's output) the calls
// run as written.
//
// A call is absorbed only when the client said nobody names its outputs (OpCall.discard, and
// no fetch or requires_grad) and one call reads them. Every operand the chain adds must exist
// at the product's place (a handle, a literal, or an earlier call's output), and no call
// between the product and the chain's end may write tensors. A batch that records for
// autodiff ends its chains at an activation that differentiates from its output.
#pragma once

#include <cstddef>
#include <vector>

#include "server/dispatch/dispatcher.h"
#include "server/service/execute.h"

namespace tensord {

struct BatchChain {
  size_t producer = 0;
  std::vector<size_t> absorbed;  // the chain's calls, in order; the last takes the outputs
  CallSpec fused;                // runs at the producer's place, in the chain's last call's stead
};

// The chains of `batch`, by producer, in batch order.
std::vector<BatchChain> FindBatchChains(const BatchSpec& batch, const Dispatcher& dispatcher);

}  // namespace tensord
