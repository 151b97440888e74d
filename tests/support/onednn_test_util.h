// Runs a oneDNN kernel and the loop kernel it shadows directly through the kernel table, for
// tests that hold the two to the same results.
#pragma once

#include <string>
#include <vector>

#include "server/backends/cpu/kernel_table.h"
#include "server/core/status.h"
#include "server/ops/registry.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {

// Runs one kernel of `op` directly: the one the backend plans for the call, the oneDNN one where
// it takes the call's shapes (loop = false), or the one after the oneDNN kernel in line.
inline absl::StatusOr<std::vector<Tensor>> RunKernel(const std::string& op, bool loop,
                                                     std::vector<Tensor> inputs,
                                                     const AttrMap& attrs) {
  ASSIGN_OR_RETURN(const OpDef* def, OpRegistry::Builtin().Find(op));
  ASSIGN_OR_RETURN(Attrs a, ValidateAttrs(op, def->attrs, attrs));
  std::vector<TensorMeta> metas;
  std::vector<DType> dtypes;
  for (const Tensor& t : inputs) {
    metas.push_back(t.meta());
    dtypes.push_back(t.dtype());
  }
  ASSIGN_OR_RETURN(std::vector<TensorMeta> out_metas, def->infer(metas, a));
  std::vector<Tensor> outputs;
  for (const TensorMeta& m : out_metas) {
    ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(m.dtype, m.shape));
    outputs.push_back(t);
  }
  // The oneDNN kernel as the dispatcher plans it (with shapes), or the next kernel in line.
  const cpu::Kernel* k = loop ? cpu::KernelTable::Get().FindAfter(*def, "onednn_" + op, dtypes, &a)
                              : cpu::KernelTable::Get().Plan({*def, dtypes, &a, metas, out_metas});
  if (k == nullptr) return absl::NotFoundError("no kernel");
  KernelCall call{*def, inputs, a, outputs, out_metas, nullptr};
  RETURN_IF_ERROR(k->run(call));
  return outputs;
}

// oneDNN against the loop kernel it shadows, on the same f32 inputs.
inline ::testing::AssertionResult SameAsLoop(const std::string& op, const std::vector<Tensor>& in,
                                             const AttrMap& attrs, double tol = 1e-5) {
  auto fast = RunKernel(op, false, in, attrs);
  auto slow = RunKernel(op, true, in, attrs);
  if (!fast.ok()) return ::testing::AssertionFailure() << op << " oneDNN: " << fast.status();
  if (!slow.ok()) return ::testing::AssertionFailure() << op << " loop: " << slow.status();
  for (size_t k = 0; k < fast->size(); ++k) {
    auto r = AllClose((*fast)[k], (*slow)[k], tol, tol);
    if (!r) return r << " (" << op << " output " << k << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tensord::testing
