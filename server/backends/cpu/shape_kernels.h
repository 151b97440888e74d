// Registration of the shape family's kernel files (called from RegisterShapeKernels).
#pragma once

#include "server/backends/cpu/kernel_table.h"

namespace tensord::cpu {
// cat, stack, split, chunk, narrow, slice, slice_backward, flip, roll, repeat, tile, tril, triu,
// diagonal, diagonal_backward
void RegisterLayoutKernels(KernelTable& t);
// index_select, gather, scatter, scatter_add, index_add, masked_fill, one_hot
void RegisterIndexingKernels(KernelTable& t);
void RegisterIndexingSelectKernels(KernelTable& t);  // masked_select, nonzero
void RegisterPadKernels(KernelTable& t);             // pad, pad_backward
void RegisterSortingKernels(KernelTable& t);         // sort, argsort, topk
}  // namespace tensord::cpu
