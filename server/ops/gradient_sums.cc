#include "server/ops/gradient_sums.h"

#include <string>
#include <utility>
#include <vector>

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

absl::Status AccumulateGrad(Tensor& slot, Tensor grad, OpRunner& runner) {
  if (!slot.defined()) {
    slot = std::move(grad);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(slot, runner.Run1(opname::add, {slot, std::move(grad)}));
  return absl::OkStatus();
}

AttrMap CreationAttrs(const TensorMeta& meta) {
  return {{"shape", meta.shape},
          {"dtype", std::string(DTypeName(meta.dtype))},
          {"device", meta.device}};
}

absl::StatusOr<Tensor> ZeroGrad(const TensorMeta& meta, OpRunner& runner) {
  return runner.Run1(opname::zeros, {}, CreationAttrs(meta));
}

}  // namespace tensord
