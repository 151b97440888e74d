// Registration of the shape family's kernel files (called from RegisterShapeKernels).
#pragma once

#include "server/backends/cpu/kernel_table.h"

namespace tensord::cpu {
void RegisterShapeJoinKernels(KernelTable& t);  // cat, stack, split, chunk, narrow, slice
void RegisterIndexingKernels(KernelTable& t);   // index_select, gather, masked_fill, one_hot
}  // namespace tensord::cpu
