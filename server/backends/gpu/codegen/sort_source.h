// Renders sort, argsort and topk as a rank sort: the order along the dim (NaN above every
// number, ties broken by index, as on the CPU) is a strict total order, so an element's place
// is the number of elements of its line that come before it, and one work item per element
// writes itself there when the place is among the first k. Deterministic and the CPU's result
// exactly; it compares every pair of a line, so it suits lines up to some thousands of
// elements (a merge network is the way for longer ones).
#pragma once

#include <string>

#include "server/backends/gpu/codegen/kernel_source.h"

namespace tensord::gpu {

// Arguments: [values], indices (int64), x, n (elements of x), outer, size, inner, k (int64),
// descending (int).
std::string RenderRankSort(const Dialect& dialect, const std::string& name, DType dtype,
                           bool values);

}  // namespace tensord::gpu
