// Renders group kernels: reductions, scans, softmax and the gradients of reductions. Work item
// i owns group i, the input elements one output element of a reduction folds together (the
// kept index space of ReduceGeometry), walks them as often as its body asks and writes either
// one value for the group or one per element. Shapes are run-time arguments, as in every
// generated kernel, so an (op, dtypes, body) compiles once for every shape and rank.
#pragma once

#include <string>
#include <vector>

#include "server/backends/gpu/codegen/kernel_source.h"

namespace tensord::gpu {

// The body is C statements (OpenCL C and CUDA C alike) over these names:
//   T, ACC, I64      the compute type; the accumulator (WIDE for floats, int64 otherwise);
//                    int64
//   WIDE, WIDE_ADD   double (float without fp64); a sum's step, compensated in float
//   ACC_ADD          WIDE_ADD for float accumulators, += for integers
//   n_red, s0        elements in a group; the call's scalar (a correction, a p), WIDE
//   EACH(...)        runs its statements for each element of the group in order, with `j`
//                    its index in the group (row-major over the reduced dims) and `off` its
//                    offset in the walked inputs; EACH_REV(...) from the last to the first
//   X0(off), X1(off) the walked inputs at `off`, as T
//   g0, g1           the group's per-group inputs (gradient, result, index), in their
//                    compute types
//   A0(k)            table input 0 at any index k, as WIDE (class weights)
//   OUT(v)           writes the group's output element; OUT_AT(v) (inside EACH) the output
//                    element at `off`, for outputs shaped like the walked inputs; OUT_GET()
//                    reads that element back, as WIDE
//   IDX(v)           writes the group's index output (int64), once per group as OUT
//   GROUP_SUM(s)     nothing here; on a work group (group_size), replaces each work item's
//                    partial sum `s` by the group's total (added in WIDE), in every work item;
//   GROUP_MAX(m)     likewise the largest of the items' `m` (a NaN wins, as BEATS_MAX)
//   GROUP_ARGMAX(m, at), GROUP_ARGMIN(m, at)
//                    likewise the items' extremum `m` (T) with its index `at` (I64, -1 for an
//                    item that saw none): of equal ones (NaNs included) the first index
//   ISNAN(v), BEATS_MAX(v, best), BEATS_MIN(v, best)
//                    NaN tests that are false for integers; `v` replaces `best` when it is
//                    larger / smaller or NaN, and nothing replaces a NaN (PyTorch's rule)
struct GroupKernel {
  std::string name;
  std::string body;
  std::vector<DType> walked;  // storage dtypes of the walked inputs (at most 2)
  std::vector<DType> groups;  // storage dtypes of the per-group inputs (at most 2)
  std::vector<DType> tables;  // storage dtypes of inputs read at any index
  DType compute = DType::kF32;
  DType output = DType::kF32;
  bool indices = false;  // a second output of int64 per group
  // 0: work item i owns group i. Otherwise work group i of this many items (a power of two)
  // owns it: EACH spreads the elements over the items (item k takes every group_size-th from
  // the k-th), GROUP_SUM adds the items' partial sums in local memory, OUT is written once.
  // Only for a cooperative plan (GroupPlan::cooperative: no EACH_REV, no order).
  int group_size = 0;
};
// Kernel arguments: out, [indices], the walked inputs, the per-group inputs, the tables, the
// geometry
// (ReduceGeometry: kept shape and strides, then reduced shape and strides), n_groups (int64),
// kept_rank, red_rank (int), n_red (int64), s0 (WIDE). Launched as n_groups work items, or
// as n_groups work groups of group_size items.
std::string RenderGroup(const Dialect& dialect, const GroupKernel& k);

}  // namespace tensord::gpu
