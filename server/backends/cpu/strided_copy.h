// The copy under every layout-changing kernel (permute, transpose, slice, narrow, cat, split,
// slice_backward, assign): walk an N-d view of the source and write an N-d view of the
// destination. Both are (base pointer, per-dim element strides) over one logical shape, so a
// permutation, a stepped range or a window into a larger tensor are all just strides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "server/core/tensor.h"

namespace tensord::cpu {

// Copies `shape` elements of `elem_size` bytes. Strides are in elements (0 = broadcast on the
// source side). Dims of size 1 are dropped and adjacent dims that are contiguous in both views
// are merged, so runs that are contiguous on both sides go through memcpy.
void StridedCopy(size_t elem_size, absl::Span<const int64_t> shape, const void* src,
                 absl::Span<const int64_t> src_strides, void* dst,
                 absl::Span<const int64_t> dst_strides);

// Copies a whole contiguous `src` into a window of `dst`: the window starts `dst_offset`
// elements into dst and advances by `dst_strides` per dim of src's shape.
void CopyIntoWindow(const Tensor& src, Tensor& dst, int64_t dst_offset,
                    absl::Span<const int64_t> dst_strides);

// Copies a window of `src` (starting `src_offset` elements in, `src_strides` per dim of dst's
// shape) into the whole contiguous `dst`.
void CopyFromWindow(const Tensor& src, int64_t src_offset, absl::Span<const int64_t> src_strides,
                    Tensor& dst);

}  // namespace tensord::cpu
