#include "server/autodiff/engine.h"

#include "absl/strings/str_cat.h"
#include "server/autodiff/backward_plan.h"
#include "server/core/status.h"
#include "server/ops/op_names.h"

namespace tensord {

absl::StatusOr<Tensor> ReduceGradTo(const Tensor& grad, const TensorMeta& target,
                                    OpRunner& runner) {
  Tensor g = grad;
  if (g.shape() != target.shape) {
    // Sum leading dims the broadcast added, then dims that were 1 in the target.
    const int64_t extra = g.rank() - static_cast<int64_t>(target.shape.size());
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < g.rank(); ++d) {
      if (d < extra || (target.shape[d - extra] == 1 && g.dim(d) != 1)) dims.push_back(d);
    }
    if (!dims.empty()) {
      ASSIGN_OR_RETURN(g, runner.Run1(opname::sum, {g}, {{"dim", dims}, {"keepdim", true}}));
    }
    ASSIGN_OR_RETURN(g, runner.Run1(opname::reshape, {g}, {{"shape", target.shape}}));
  }
  if (g.dtype() != target.dtype) {
    ASSIGN_OR_RETURN(
        g, runner.Run1(opname::to_dtype, {g}, {{"dtype", std::string(DTypeName(target.dtype))}}));
  }
  return g;
}

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
