#include "server/backends/gpu/kernel_table.h"

#include <cstdio>
#include <cstdlib>

#include "server/ops/registry.h"

namespace tensord::gpu {

const GpuKernelTable& GpuKernelTable::Get() {
  static const GpuKernelTable* table = [] {
    auto* t = new GpuKernelTable();
    t->kernels_.resize(OpRegistry::BuiltinCount());
    RegisterCopyKernels(*t);
    RegisterLayoutKernels(*t);
    RegisterIndexingKernels(*t);
    RegisterReductionKernels(*t);
    RegisterNormKernels(*t);
    RegisterConvKernels(*t);
    RegisterPoolKernels(*t);
    RegisterCreationKernels(*t);
    RegisterLossKernels(*t);
    RegisterSortKernels(*t);
    RegisterActivationKernels(*t);
    RegisterResampleKernels(*t);
    RegisterCrossEntropyKernels(*t);
    RegisterLinalgKernels(*t);
    RegisterOptimizerKernels(*t);
    RegisterSelectKernels(*t);
    RegisterElementwiseKernels(*t);
    RegisterFusedElementwiseKernels(*t);
    RegisterFusedProductKernels(*t);
    return t;
  }();
  return *table;
}

void GpuKernelTable::Add(const std::string& op, GpuKernel kernel) {
  const int id = OpRegistry::BuiltinId(op);
  const char* wrong = id == kNotBuiltin  ? "an unknown op"
                      : kernels_[id].run ? "a second kernel for"
                      : kernel.run       ? nullptr
                                         : "no function for";
  if (wrong != nullptr) {
    std::fprintf(stderr, "tensord: internal error: GPU kernel table: %s '%s'\n", wrong, op.c_str());
    std::abort();
  }
  kernels_[id] = std::move(kernel);
}

const GpuKernel* GpuKernelTable::Find(const OpDef& op) const {
  if (op.id == kNotBuiltin || !kernels_[op.id].run) return nullptr;
  return &kernels_[op.id];
}

const GpuKernel* GpuKernelTable::Plan(const KernelQuery& q, const DeviceRuntime& device) const {
  const GpuKernel* k = Find(q.op);
  if (k == nullptr) return nullptr;
  if (!device.has_fp64()) {
    if (k->needs_fp64) return nullptr;
    for (DType d : q.dtypes) {
      if (d == DType::kF64) return nullptr;
    }
    for (const TensorMeta& m : q.outputs) {
      if (m.dtype == DType::kF64) return nullptr;  // sum(x, dtype=f64)
    }
  }
  if (!k->moves_bits) {
    for (DType d : q.dtypes) {
      if (IsStorageOnly(d)) return nullptr;
    }
  }
  // A listing asks about the op alone.
  if (q.attrs == nullptr || (q.inputs.empty() && !q.op.creation)) return k;
  return !k->supports || k->supports(q, device) ? k : nullptr;
}

}  // namespace tensord::gpu
