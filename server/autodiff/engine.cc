#include "server/autodiff/engine.h"

#include "server/autodiff/backward_plan.h"
#include "server/core/status.h"

namespace tensord {

absl::StatusOr<std::vector<LeafGradient>> RunBackward(AutodiffContext& ctx,
                                                      const std::vector<Tensor>& roots,
                                                      const std::vector<Tensor>& seeds,
                                                      bool retain_graph, OpRunner& runner,
                                                      LeafGradientSink* sink) {
  BackwardGraph graph;
  ASSIGN_OR_RETURN(BackwardPlan plan, PlanBackward(ctx, roots, graph));
  ASSIGN_OR_RETURN(std::vector<Tensor> grads,
                   RunBackwardPlan(plan, graph, roots, seeds, runner, sink));
  std::vector<LeafGradient> out;
  for (size_t l = 0; l < grads.size(); ++l) {
    if (grads[l].defined()) out.push_back({graph.leaves[l], std::move(grads[l])});
  }
  if (!retain_graph) {
    for (Node* node : graph.nodes) node->Free();
    ctx.RemoveFreed();
  }
  return out;
}

}  // namespace tensord
