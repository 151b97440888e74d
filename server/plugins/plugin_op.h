// A custom op of a plugin (include/tensord/plugin.h) as the server keeps it: the C descriptor
// copied into owned values, and its conversions into op table entries and CPU kernels. The C
// callbacks run behind adapters that turn tensors and attributes into the ABI's structs and the
// plugin's (code, message) into a Status naming the op and the plugin.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backends/cpu/kernel_table.h"
#include "server/ops/op_def.h"
#include "tensord/plugin.h"

namespace tensord::plugins {

struct PluginOp {
  std::string name;
  std::string doc;
  int min_inputs = 1;
  int max_inputs = 1;  // kVariadic for any number
  int num_outputs = 1;
  std::vector<std::string> input_names;
  std::vector<AttrSpec> attrs;
  DTypeSet dtypes;
  tensord_shape_fn shape = nullptr;
  tensord_kernel_fn cpu_kernel = nullptr;
  tensord_backward_fn backward = nullptr;
  bool non_differentiable = false;
  void* user_data = nullptr;
  std::string origin;  // the plugin's file name (ListOps origin, error metadata `plugin`)
};

// Copies and checks one descriptor. INVALID_ARGUMENT naming the op and what is malformed.
absl::StatusOr<PluginOp> ParseOpDef(const tensord_op_def& def, const std::string& origin);

// The helper op that runs a plugin's backward kernel through the dispatcher.
std::string BackwardOpName(const std::string& op);

// The op's table entries: the op itself, then "<name>_backward" (internal) when it has a
// backward kernel.
std::vector<OpDef> MakeOpDefs(const std::shared_ptr<const PluginOp>& op);

// The CPU kernels of the entries of MakeOpDefs, as (op name, kernel).
std::vector<std::pair<std::string, cpu::Kernel>> MakeKernels(
    const std::shared_ptr<const PluginOp>& op);

}  // namespace tensord::plugins
