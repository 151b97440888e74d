// The CPU kernel list: per op, kernels in preference order (oneDNN first where it applies, a
// portable loop last), each with a predicate saying which calls it handles.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/backends/backend.h"
#include "server/core/status.h"

namespace tensord::cpu {

using KernelFn = std::function<absl::Status(KernelCall& call)>;
// Whether the kernel handles these input dtypes (and, if it cares, attributes).
using KernelPredicate = std::function<bool(absl::Span<const DType> dtypes, const Attrs* attrs)>;
// Whether it runs a call of these shapes (and attributes, never null here): a shape a oneDNN
// primitive does not reproduce exactly is refused when the call is planned, so that the next
// kernel in line is chosen then and the chosen one never declines at run time.
using CallPredicate = std::function<bool(const KernelQuery& query)>;

struct Kernel {
  std::string name;  // "onednn_matmul", "loop_add"
  KernelPredicate supports;
  KernelFn run;
  // The storage dtypes (bf16, f16, u8, i8, i16) it takes as inputs and outputs itself. Lookups
  // naming another storage dtype skip the kernel (whatever its predicate says), so the
  // dispatcher computes those calls in the compute dtype.
  DTypeSet storage;
  // Null: every call `supports` admits. Listings, which know no shapes, do not ask.
  CallPredicate accepts;
};

class KernelTable {
 public:
  static const KernelTable& Get();
  // Adds the kernel of an op that is not built in (a plugin op), at server start-up. The
  // built-in lists above are fixed; an extension op has exactly one kernel per process, so
  // the same `owner` (a plugin's path) may add it again (a second server loading the same
  // plugin: no change), while a built-in op or another owner's op is refused
  // (INVALID_ARGUMENT). Safe while other threads look kernels up.
  static absl::Status AddExtension(const std::string& op, const std::string& owner, Kernel kernel);
  // The owner of the extension kernel of `op`, or "" when `op` has none.
  static std::string ExtensionOwner(const std::string& op);
  // Appends a kernel for the built-in op named `op` (call order = preference order). The name
  // is looked up once, here; a name the catalog lacks stops the process at start-up.
  void Add(const std::string& op, Kernel kernel);
  // Registers a kernel accepting every dtype in `dtypes` for all its inputs' first dtype
  // (taking the storage dtypes `dtypes` names directly).
  void Add(const std::string& op, const std::string& name, DTypeSet dtypes, KernelFn run);
  // First kernel that supports the call, or null. Built-in ops are found by their id; only an
  // extension op is found by name.
  const Kernel* Find(const OpDef& op, absl::Span<const DType> dtypes, const Attrs* attrs) const;
  // The kernel that runs the call described, asking each kernel's `accepts` too when the query
  // has the inputs' shapes and the attributes; null when none does.
  const Kernel* Plan(const KernelQuery& query) const;
  bool Has(const OpDef& op) const;
  // The first kernel after the one named `after` that supports the call: a kernel that
  // declines a call at run time (a shape or value it cannot reproduce exactly) hands it on.
  const Kernel* FindAfter(const OpDef& op, const std::string& after, absl::Span<const DType> dtypes,
                          const Attrs* attrs) const;

 private:
  struct Extension {
    std::string owner;
    std::unique_ptr<Kernel> kernel;  // stable address: Find returns it without the lock held
  };
  static KernelTable& Instance();
  const Kernel* FindExtension(const std::string& op, absl::Span<const DType> dtypes,
                              const Attrs* attrs) const;

  // Built once, then only read; indexed by OpDef::id.
  std::vector<std::vector<Kernel>> kernels_;
  // Consulted only for ops that are not built in, so built-in calls never take the lock.
  mutable absl::Mutex extensions_mu_;
  std::map<std::string, Extension> extensions_ ABSL_GUARDED_BY(extensions_mu_);
};

// Family registration, one per kernel file. oneDNN kernels register first so that they are
// preferred; the loop kernels of each family are the portable reference after them.
void RegisterOneDnnKernels(KernelTable& t);
void RegisterCreationKernels(KernelTable& t);
void RegisterElementwiseKernels(KernelTable& t);
void RegisterActivationKernels(KernelTable& t);
void RegisterReductionKernels(KernelTable& t);
void RegisterShapeKernels(KernelTable& t);
void RegisterLinalgKernels(KernelTable& t);
void RegisterOptimizerKernels(KernelTable& t);
void RegisterNnKernels(KernelTable& t);

}  // namespace tensord::cpu
