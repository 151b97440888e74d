// The op table. Families register their entries from their own files (elementwise_arithmetic.cc,
// reduction.cc, ...); the registry is built once and is immutable afterwards.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/ops/op_def.h"

namespace tensord {

class OpRegistry {
 public:
  // The built-in catalog.
  static const OpRegistry& Builtin();

  // UNKNOWN_OP when absent.
  absl::StatusOr<const OpDef*> Find(const std::string& name) const;
  std::vector<const OpDef*> All() const;  // sorted by name
  // The names of server/ops/op_names.h that are not registered here (none in a sound build:
  // Builtin() stops the process otherwise).
  std::vector<std::string> UnknownOpsRunByName() const;

  // The id of the built-in op `name` (OpDef::id), or kNotBuiltin. Backends look their ops up
  // here once, when they build their kernel tables.
  static int BuiltinId(const std::string& name);
  // The number of built-in ops: ids run from 0 to this, exclusive.
  static int BuiltinCount();

  // Adds an op; INVALID_ARGUMENT on a name clash or an inconsistent entry.
  absl::Status Add(OpDef def);

 private:
  std::map<std::string, std::unique_ptr<OpDef>> ops_;
};

// Family registration functions, one per file in server/ops/.
void RegisterCreationOps(OpRegistry& r);
void RegisterElementwiseOps(OpRegistry& r);
void RegisterActivationOps(OpRegistry& r);
void RegisterReductionOps(OpRegistry& r);
void RegisterShapeOps(OpRegistry& r);
void RegisterLinalgOps(OpRegistry& r);
void RegisterNnOps(OpRegistry& r);
void RegisterLossOps(OpRegistry& r);
void RegisterOptimizerOps(OpRegistry& r);
void RegisterCollectiveOps(OpRegistry& r);  // distributed_collectives.cc

}  // namespace tensord

namespace tensord {
// For built-in tables: a bad entry is a programming error, reported at start-up.
void MustAdd(OpRegistry& r, OpDef def);
}  // namespace tensord
