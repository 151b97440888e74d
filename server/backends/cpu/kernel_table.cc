#include "server/backends/cpu/kernel_table.h"

#include <algorithm>

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
                 std::move(run), (dtypes.bits() & kLowPrecision.bits()) != 0});
}

namespace {

// Kernels written before bf16/f16 existed have predicates that may say yes to them (any
// float, any dtype); only kernels that declare low-precision support may see those dtypes.
bool Accepts(const Kernel& k, absl::Span<const DType> dtypes, const Attrs* attrs) {
  if (!k.low_precision && std::any_of(dtypes.begin(), dtypes.end(), IsLowPrecision)) {
    return false;
  }
  return k.supports(dtypes, attrs);
}

}  // namespace

const Kernel* KernelTable::Find(const std::string& op, absl::Span<const DType> dtypes,
                                const Attrs* attrs) const {
  auto it = kernels_.find(op);
  if (it == kernels_.end()) return nullptr;
  for (const Kernel& k : it->second) {
    if (Accepts(k, dtypes, attrs)) return &k;
  }
  return nullptr;
}

const Kernel* KernelTable::FindAfter(const std::string& op, const std::string& after,
                                     absl::Span<const DType> dtypes, const Attrs* attrs) const {
  auto it = kernels_.find(op);
  if (it == kernels_.end()) return nullptr;
  bool seen = false;
  for (const Kernel& k : it->second) {
    if (seen && Accepts(k, dtypes, attrs)) return &k;
    seen |= k.name == after;
  }
  return nullptr;
}

}  // namespace tensord::cpu
