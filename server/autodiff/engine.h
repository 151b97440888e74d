// The reverse pass: walks a context's tape from the roots back to the requires-grad leaves.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/autodiff/backward_plan.h"
#include "server/autodiff/tape.h"
#include "server/ops/gradient_sums.h"

namespace tensord {

struct LeafGradient {
  std::shared_ptr<AutogradMeta> leaf;
  Tensor grad;
};

// `seeds[i]` may be undefined for a single-element root (seeded with one). `runner` must not
// record. Without `retain_graph` the nodes it walked are freed. On error nothing is freed.
// `sink`, when given, is told of each leaf's gradient as soon as it is final.
absl::StatusOr<std::vector<LeafGradient>> RunBackward(AutodiffContext& ctx,
                                                      const std::vector<Tensor>& roots,
                                                      const std::vector<Tensor>& seeds,
                                                      bool retain_graph, OpRunner& runner,
                                                      LeafGradientSink* sink = nullptr);

}  // namespace tensord
