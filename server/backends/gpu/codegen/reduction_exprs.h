// The group ops a GPU backend generates (reductions, scans, softmax, the gradients of
// reductions) as bodies of the group template (reduction_source.h), term for term as the CPU
// kernels compute them, so that NaNs, ties, empty groups and zeros come out the same.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/dtype.h"
#include "server/ops/attrs.h"

namespace tensord::gpu {

struct GroupPlan {
  std::string body;
  std::vector<int> walked;    // the call's inputs walked over each group (one shape)
  std::vector<int> groups;    // the call's inputs read once per group
  std::vector<int> tables;    // the call's inputs read at any index
  std::vector<int64_t> dims;  // the dims of the walked inputs a group spans, ascending
  DType compute = DType::kF32;
  bool indices = false;  // the call's second output: the group's int64 index
  double scalar = 0;     // s0
  // The body adds up across its group only through GROUP_SUM and writes only through OUT and
  // OUT_AT: a long group may run on a work group (reduction_source.h, GroupKernel::group_size).
  bool cooperative = false;
};

// Whether `op` is a group op of the generator.
bool HasGroup(const std::string& op);
// The plan of a call of `op` whose inputs have these ranks and dtypes and whose first output
// has dtype `output`; the attributes were checked by the op's inference. Fails for an op that
// is no group op.
absl::StatusOr<GroupPlan> PlanGroup(const std::string& op, const Attrs& attrs,
                                    const std::vector<int64_t>& input_ranks,
                                    const std::vector<DType>& input_dtypes, DType output);

// prelu's weight gradient (inputs: grad, x): per channel (dim 1) or, for one weight, over
// everything, the sum of x * grad where x is not positive, in double as the CPU loop.
GroupPlan PreluWeightGradPlan(int64_t rank, bool per_channel, DType dtype);

}  // namespace tensord::gpu
