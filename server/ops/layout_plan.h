// The layout ops whose every output element is one input element moved: cat, stack, split,
// chunk, narrow, slice, slice_backward, flip, roll, repeat, tile, diagonal and
// diagonal_backward. Each is a few strided window copies between contiguous tensors; they are
// planned here once, from shapes and attributes, so that every backend runs the same copies
// and only has to know how to copy a window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/core/shape.h"
#include "server/ops/attrs.h"

namespace tensord::ops {

// Copies `shape` elements from input `input` (starting `src_offset` elements in, advancing by
// `src_strides` per dim of `shape`) to output `output` (likewise). Strides may be negative
// (flip) or zero (repeat reads one element many times).
struct WindowCopy {
  size_t input = 0;
  size_t output = 0;
  Shape shape;
  int64_t src_offset = 0;
  std::vector<int64_t> src_strides;
  int64_t dst_offset = 0;
  std::vector<int64_t> dst_strides;
};

struct LayoutPlan {
  // The outputs start as zeros and the copies fill part of them (the backward ops).
  bool zero_outputs = false;
  std::vector<WindowCopy> copies;
};

// Whether `op` is one of the ops above.
bool IsLayoutOp(const std::string& op);

// The copies of `op` on contiguous inputs and outputs of these shapes (the outputs' from the
// op's shape inference). Errors are the attribute errors inference reports.
absl::StatusOr<LayoutPlan> PlanLayout(const std::string& op, absl::Span<const Shape> inputs,
                                      absl::Span<const Shape> outputs, const Attrs& attrs);

// pad's map along one dim of `n` input elements padded by `before`/`after` (negative: cut) to
// `out` elements: the input position each output position reads, -1 for the constant.
// Reflect and replicate mirror or clamp at the input's own ends; circular wraps within what
// the negative pads leave (torch crops first, then wraps the cropped tensor).
std::vector<int64_t> PadSourceMap(const std::string& mode, int64_t n, int64_t before, int64_t after,
                                  int64_t out);

}  // namespace tensord::ops
