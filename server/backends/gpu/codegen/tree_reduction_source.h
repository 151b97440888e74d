// Renders work-group tree reductions for long groups: one work group per output element, its
// work items striding over the group's elements (each folding every `size`-th one, compensated
// where sums are), then folding their partials pairwise in local memory. The group template
// (reduction_source.h) gives one work item a group and suits many short groups; this one
// spreads one long group (a loss's sum over a batch, a full reduction) over a work group, and
// a few long groups over many: each group cut into slices, a work group folding a slice into a
// partial, a second launch folding each group's partials.
#pragma once

#include <string>

#include "server/backends/gpu/codegen/kernel_source.h"

namespace tensord::gpu {

enum class TreeFold { kSum, kMean, kMax, kMin };

struct TreeReduceKernel {
  std::string name;
  TreeFold fold = TreeFold::kSum;
  DType input = DType::kF32;    // storage dtype of the walked input
  DType compute = DType::kF32;  // as the group plan's
  DType output = DType::kF32;
  int size = 256;  // work items per group, a power of two
  // Writes each slice's fold as it stands (a mean not yet divided), in `output`: the partials
  // a second launch folds.
  bool partial = false;
};
// Kernel arguments as the group template's with one walked input and nothing else: out, x0,
// the geometry (ReduceGeometry), n_groups (int64), kept_rank, red_rank (int), n_red (int64);
// then slices, chunk and count (int64). Launched as n_groups * slices work groups of `size`:
// work group w folds slice s = w % slices of group w / slices, its elements [s * chunk,
// (s + 1) * chunk), the last slice's up to n_red, into out[w]; every slice has at least
// `size` elements. A mean divides by count (the elements of the group the partials came from).
std::string RenderTreeReduce(const Dialect& dialect, const TreeReduceKernel& k);

}  // namespace tensord::gpu
