// Workspaces a oneDNN forward leaves for its backward (max pooling's argmax positions), kept
// against the input they were computed from, so that the backward need not run the forward
// again. An entry holds until its input's storage dies or is written (its version moves), or
// until the cache, bounded in entries and bytes, evicts it (least recently used first); a
// backward that finds none reruns the forward, as it would without the cache.
#pragma once

#include <memory>
#include <string>

#include "server/backends/cpu/onednn_common.h"

namespace tensord::cpu::onednn {

// Keeps `workspace` as what the primitive `key` computed from `input` as it is now.
void KeepWorkspace(const std::string& key, const Tensor& input,
                   std::shared_ptr<const PooledMemory> workspace);
// The workspace `key` computed from `input` at its current version, or null.
std::shared_ptr<const PooledMemory> FindWorkspace(const std::string& key, const Tensor& input);

// The bounds: at most this many workspaces, of at most this many bytes in all.
inline constexpr size_t kMaxWorkspaces = 64;
inline constexpr size_t kMaxWorkspaceBytes = size_t{64} << 20;

}  // namespace tensord::cpu::onednn
