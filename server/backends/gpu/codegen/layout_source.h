// Renders the kernels of the layout ops: a window copy (every op of server/ops/layout_plan.h
// runs as a few of them), the triangle mask of tril/triu, and one pass of pad along a dim.
// Copies move storage bits (bf16 and f16 alike as 16-bit words), so one kernel per storage
// width serves every dtype, shape and rank.
#pragma once

#include <string>

#include "server/backends/gpu/codegen/kernel_source.h"

namespace tensord::gpu {

// out[dst] = in[src] for every element of a walked shape; src and dst start at the offsets
// and advance by their strides. Arguments: out, in, geometry (StridedGeometry of the walked
// shape over {src strides, dst strides}), n (elements), rank (int), src_offset, dst_offset.
std::string RenderWindowCopy(const Dialect& dialect, const std::string& name, DType storage);

// out[i] = in[i] where col - row <= diagonal (lower) or >= diagonal (upper) in the last two
// dims, else 0. Arguments: out, in, n, rows, cols, diagonal (int64), lower (int).
std::string RenderTriangle(const Dialect& dialect, const std::string& name, DType storage);

// One pass of pad or pad_backward along a dim, the tensor seen as [outer, len, inner]: output
// position j along the dim sums the input positions of its list in `table` (CSR: table[j] and
// table[j + 1] bound the list's entries in table itself), or is `fill` for an empty list. A
// forward pass lists one position or none; a backward pass lists every position that read j.
// Arguments: out, in, table, n (output elements), src_len, dst_len, inner (int64), fill (T).
std::string RenderPadPass(const Dialect& dialect, const std::string& name, DType dtype);

}  // namespace tensord::gpu
