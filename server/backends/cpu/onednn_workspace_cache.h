// Buffers oneDNN derived from a tensor, kept against it: the workspace a forward leaves for
// its backward (max pooling's argmax positions), so that the backward need not run the forward
// again, and a tensor's copy in a primitive's blocked layout, so that the next primitive
// reading it in that layout need not reorder it again. An entry holds until its tensor's
// storage dies or is written (its version moves), or until the cache, bounded in entries and
// bytes, evicts it (least recently used first); a caller that finds none derives the buffer
// again, as it would without the cache.
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
