// Renders the selections whose output size depends on the data (nonzero, masked_select and
// masked_select_backward) as a two-pass scan over chunks of the elements they walk: a first
// kernel counts the selected elements of each chunk, the host sums the counts into each
// chunk's first output position (it needs the total anyway, to allocate the output), and a
// second kernel walks each chunk again, writing its selections from that position on. Each
// chunk writes in element order, so the output is the CPU's, in its order.
#pragma once

#include <string>

#include "server/backends/gpu/codegen/kernel_source.h"

namespace tensord::gpu {

// counts[c] = the number of nonzero elements of m among elements [c * chunk, (c + 1) * chunk)
// of the walk (NaN counts, as in torch). Arguments: counts (int64), m, geometry (shape, m's
// strides), n (elements), rank (int), chunk (int64).
std::string RenderChunkCount(const Dialect& dialect, const std::string& name, DType mask);

enum class Selection {
  // nonzero: out row j = the multi-index of the j-th nonzero element of the contiguous x, or,
  // for column k >= 0, only its index k (0 beyond the rank: a 0-d input's one column).
  // Arguments: out (int64), x, offsets, geometry (x's shape), n, rank, chunk, column (int).
  kNonzeroIndices,
  // masked_select: out[j] = x at the j-th true mask element of the broadcast walk. Arguments:
  // out, x, m (bool), offsets, geometry (shape, x's strides, m's strides), n, rank, chunk.
  kMaskedValues,
  // masked_select_backward: out[e] = g[j] at the j-th true mask element, else 0. Arguments:
  // out, g, m (bool), offsets, geometry (out's shape, m's strides), n, rank, chunk.
  kMaskedPlacement,
};
// `dtype` is x's (nonzero) or the values' storage dtype.
std::string RenderSelection(const Dialect& dialect, const std::string& name, DType dtype,
                            Selection what);

}  // namespace tensord::gpu
