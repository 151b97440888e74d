#include "server/backends/cpu/kernel_table.h"

namespace tensord::cpu {

const KernelTable& KernelTable::Get() {
  static const KernelTable* table = [] {
    auto* t = new KernelTable();
    RegisterOneDnnKernels(*t);
    RegisterCreationKernels(*t);
    RegisterElementwiseKernels(*t);
    RegisterActivationKernels(*t);
    RegisterReductionKernels(*t);
    RegisterShapeKernels(*t);
    RegisterLinalgKernels(*t);
    RegisterNnKernels(*t);
    return t;
  }();
  return *table;
}

void KernelTable::Add(const std::string& op, Kernel kernel) {
  kernels_[op].push_back(std::move(kernel));
}

void KernelTable::Add(const std::string& op, const std::string& name, DTypeSet dtypes,
                      KernelFn run) {
  Add(op, Kernel{name,
                 [dtypes](absl::Span<const DType> d, const Attrs*) {
                   return d.empty() || dtypes.Contains(d[0]);
                 },
                 std::move(run)});
}

const Kernel* KernelTable::Find(const std::string& op, absl::Span<const DType> dtypes,
                                const Attrs* attrs) const {
  auto it = kernels_.find(op);
  if (it == kernels_.end()) return nullptr;
  for (const Kernel& k : it->second) {
    if (k.supports(dtypes, attrs)) return &k;
  }
  return nullptr;
}

const Kernel* KernelTable::FindAfter(const std::string& op, const std::string& after,
                                     absl::Span<const DType> dtypes, const Attrs* attrs) const {
  auto it = kernels_.find(op);
  if (it == kernels_.end()) return nullptr;
  bool seen = false;
  for (const Kernel& k : it->second) {
    if (seen && k.supports(dtypes, attrs)) return &k;
    seen |= k.name == after;
  }
  return nullptr;
}

}  // namespace tensord::cpu
