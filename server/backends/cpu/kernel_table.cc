#include "server/backends/cpu/kernel_table.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "server/ops/registry.h"

namespace tensord::cpu {

const KernelTable& KernelTable::Get() { return Instance(); }

KernelTable& KernelTable::Instance() {
  static KernelTable* table = [] {
    auto* t = new KernelTable();
    t->kernels_.resize(OpRegistry::BuiltinCount());
    RegisterOneDnnKernels(*t);
    RegisterCreationKernels(*t);
    RegisterElementwiseKernels(*t);
    RegisterActivationKernels(*t);
    RegisterReductionKernels(*t);
    RegisterShapeKernels(*t);
    RegisterLinalgKernels(*t);
    RegisterNnKernels(*t);
    RegisterOptimizerKernels(*t);
    return t;
  }();
  return *table;
}

void KernelTable::Add(const std::string& op, Kernel kernel) {
  const int id = OpRegistry::BuiltinId(op);
  if (id == kNotBuiltin) {
    std::fprintf(stderr, "tensord: internal error: CPU kernel %s for an unknown op '%s'\n",
                 kernel.name.c_str(), op.c_str());
    std::abort();
  }
  kernels_[id].push_back(std::move(kernel));
}

void KernelTable::Add(const std::string& op, const std::string& name, DTypeSet dtypes,
                      KernelFn run) {
  Add(op, Kernel{name,
                 [dtypes](absl::Span<const DType> d, const Attrs*) {
                   return d.empty() || dtypes.Contains(d[0]);
                 },
                 std::move(run), DTypeSet(dtypes.bits() & kStorageOnly.bits())});
}

namespace {

// Predicates may say yes to storage dtypes they never heard of (any float, any int); only
// kernels that declare a storage dtype may see it.
bool Accepts(const Kernel& k, absl::Span<const DType> dtypes, const Attrs* attrs) {
  if (std::any_of(dtypes.begin(), dtypes.end(),
                  [&](DType d) { return IsStorageOnly(d) && !k.storage.Contains(d); })) {
    return false;
  }
  return k.supports(dtypes, attrs);
}

}  // namespace

absl::Status KernelTable::AddExtension(const std::string& op, const std::string& owner,
                                       Kernel kernel) {
  KernelTable& t = Instance();
  if (OpRegistry::BuiltinId(op) != kNotBuiltin) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernels: op '", op, "' is built in; ", owner, " cannot replace its kernel"));
  }
  absl::MutexLock lock(&t.extensions_mu_);
  auto it = t.extensions_.find(op);
  if (it != t.extensions_.end()) {
    if (it->second.owner == owner) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "kernels: op '", op, "' already has a kernel from ", it->second.owner, " in this process"));
  }
  t.extensions_[op] = Extension{owner, std::make_unique<Kernel>(std::move(kernel))};
  return absl::OkStatus();
}

std::string KernelTable::ExtensionOwner(const std::string& op) {
  KernelTable& t = Instance();
  absl::MutexLock lock(&t.extensions_mu_);
  auto it = t.extensions_.find(op);
  return it == t.extensions_.end() ? "" : it->second.owner;
}

bool KernelTable::Has(const OpDef& op) const {
  if (op.id != kNotBuiltin) return !kernels_[op.id].empty();
  absl::MutexLock lock(&extensions_mu_);
  return extensions_.count(op.name) > 0;
}

const Kernel* KernelTable::FindExtension(const std::string& op, absl::Span<const DType> dtypes,
                                         const Attrs* attrs) const {
  absl::MutexLock lock(&extensions_mu_);
  auto it = extensions_.find(op);
  if (it == extensions_.end() || !Accepts(*it->second.kernel, dtypes, attrs)) return nullptr;
  return it->second.kernel.get();
}

const Kernel* KernelTable::Find(const OpDef& op, absl::Span<const DType> dtypes,
                                const Attrs* attrs) const {
  return Plan({op, dtypes, attrs});  // no shapes: `accepts` is not asked
}

const Kernel* KernelTable::Plan(const KernelQuery& q) const {
  if (q.op.id == kNotBuiltin) return FindExtension(q.op.name, q.dtypes, q.attrs);
  const bool shapes =
      q.attrs != nullptr && !q.outputs.empty() && (!q.inputs.empty() || q.op.creation);
  for (const Kernel& k : kernels_[q.op.id]) {
    if (!Accepts(k, q.dtypes, q.attrs)) continue;
    if (shapes && k.accepts && !k.accepts(q)) continue;
    return &k;
  }
  return nullptr;
}

const Kernel* KernelTable::FindAfter(const OpDef& op, const std::string& after,
                                     absl::Span<const DType> dtypes, const Attrs* attrs) const {
  if (op.id == kNotBuiltin) return nullptr;
  bool seen = false;
  for (const Kernel& k : kernels_[op.id]) {
    if (seen && Accepts(k, dtypes, attrs)) return &k;
    seen |= k.name == after;
  }
  return nullptr;
}

}  // namespace tensord::cpu
