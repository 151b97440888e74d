// Loads custom-op plugins (shared libraries speaking include/tensord/plugin.h) for a server
// that is starting: their ops join a copy of the op table, their kernels the CPU kernel table.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/ops/registry.h"

namespace tensord::plugins {

// `base` plus the ops of every plugin in `paths`, in order. INVALID_ARGUMENT, with a one-line
// message naming the plugin and the problem, when a file cannot be loaded, lacks the entry
// points, speaks another ABI version, fails to initialise, registers a malformed op, or
// registers a name already taken (by `base`, an earlier plugin, or in this process by another
// plugin file); then nothing of any plugin is served. Loaded libraries stay loaded for the
// life of the process.
absl::StatusOr<std::shared_ptr<const OpRegistry>> RegistryWithPlugins(
    const OpRegistry& base, const std::vector<std::string>& paths);

}  // namespace tensord::plugins
