// Comparisons and logical ops: broadcast, promote both sides to their common dtype, and give a
// bool tensor. Marked non-differentiable: outputs are plain tensors even for autodiff inputs.
#include "server/ops/elementwise.h"
#include "server/ops/op_helpers.h"

namespace tensord {

void RegisterComparisonOps(OpRegistry& r) {
  // PyTorch's logical ops accept any dtype and treat nonzero (NaN included) as true.
  for (const char* name :
       {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"}) {
    MustAdd(r, ops::BinaryDef(name, kAll, Marking::kNonDifferentiable, nullptr, DType::kBool));
  }
}

}  // namespace tensord
