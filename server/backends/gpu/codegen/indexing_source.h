// Renders the kernels of the ops that index by tensors. Reads (index_select, gather,
// embedding) compute their source offset from the index on the device; writes that may land
// on one element more than once (the scatters, index_add, embedding's gradient) get, per
// output element, the list of sources that land on it (built on the host, which has read the
// indices to check them), so each element sums its list in the CPU's order: deterministic,
// no atomics, the same bits as the CPU.
#pragma once

#include <string>

#include "server/backends/gpu/codegen/kernel_source.h"

namespace tensord::gpu {

// out[i] = x[xo + idx[io] * dim_stride], xo and io walked over a shape (the geometry: shape,
// x strides, idx strides). Arguments: out, x, idx, geometry, n, rank (int), dim_stride.
std::string RenderGather(const Dialect& dialect, const std::string& name, DType storage,
                         DType index);

// How a listed write combines with what is there.
enum class ListedWrite {
  kAdd,        // out[i] = x[i] + alpha * each listed source, in list order
  kAddToZero,  // out[i] = 0 + each listed source (no x)
  kAssign,     // out[i] = the last listed source, or x[i] for an empty list
};
// Arguments: out, [x], src, table (CSR: table[i] and table[i + 1] bound element i's entries,
// which are src offsets), n, alpha (T).
std::string RenderListedWrite(const Dialect& dialect, const std::string& name, DType dtype,
                              ListedWrite how);

// out[i * classes + idx[i]] = 1 (out is zeros first). Arguments: out (int64), idx, n, classes.
std::string RenderOneHot(const Dialect& dialect, const std::string& name, DType index);

}  // namespace tensord::gpu
