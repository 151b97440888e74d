// Renders sort, argsort and topk as a rank sort: the order along the dim (NaN above every
// number, ties broken by index, as on the CPU) is a strict total order, so an element's place
// is the number of elements of its line that come before it, and one work item per element
// writes itself there when the place is among the first k. Deterministic and the CPU's result
// exactly; it compares every pair of a line, so it serves short lines. Long lines are merge
// sorted: runs of 1, 2, 4, ... elements merged pairwise, one pass per width, each element
// finding its place in the merged run by a binary search in the other run (stable: a tie goes
// to the left run, whose elements come first in the line), so the result is the same order.
#pragma once

#include <string>

#include "server/backends/gpu/codegen/kernel_source.h"

namespace tensord::gpu {

// Arguments: [values], indices (int64), x, n (elements of x), outer, size, inner, k (int64),
// descending (int).
std::string RenderRankSort(const Dialect& dialect, const std::string& name, DType dtype,
                           bool values);

// The merge sort's kernels over lines laid out [lines][size] (line = outer index * inner +
// inner index), keys in the storage type and their indices (int64) in the line.
// Gather: keys, idx, x, n, size, inner (int64): every element of x to its line.
std::string RenderSortGather(const Dialect& dialect, const std::string& name, DType dtype);
// One pass: keys/idx into out_keys/out_idx, runs of `width` merged pairwise. Arguments:
// out_keys, out_idx, keys, idx, n, size, width (int64), descending (int).
std::string RenderMergePass(const Dialect& dialect, const std::string& name, DType dtype);
// The first k of each sorted line to the outputs [outer, k, inner]: [values], indices, keys,
// idx, n_out (outer * k * inner), size, inner, k (int64).
std::string RenderSortScatter(const Dialect& dialect, const std::string& name, DType dtype,
                              bool values);

}  // namespace tensord::gpu
