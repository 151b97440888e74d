// Shared by the shape and indexing op files (shape.cc, shape_join.cc, shape_slice.cc,
// indexing_gather.cc, shape_device.cc, shape_rearrange.cc, shape_pad.cc,
// indexing_scatter_select.cc, sorting.cc): the family's registration pieces and the attribute
// resolution their kernels share.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/shape.h"
#include "server/ops/op_def.h"
#include "server/ops/registry.h"

namespace tensord {

// Registered from RegisterShapeOps so that registry.cc needs one entry for the family.
void RegisterShapeJoinOps(OpRegistry& r);       // cat, stack, split, chunk
void RegisterShapeSliceOps(OpRegistry& r);      // narrow, slice, slice_backward
void RegisterIndexingOps(OpRegistry& r);        // index_select, gather, masked_fill, one_hot
void RegisterShapeDeviceOps(OpRegistry& r);     // to_device, assign
void RegisterShapeRearrangeOps(OpRegistry& r);  // flip, roll, repeat, tile, tril, triu
void RegisterPadOps(OpRegistry& r);             // pad, pad_backward
// scatter, scatter_add, index_add, masked_select, nonzero
void RegisterIndexingScatterSelectOps(OpRegistry& r);
void RegisterSortingOps(OpRegistry& r);  // sort, argsort, topk

namespace ops {

// The entry most ops of the family start from: one input, differentiable, over every dtype.
OpDef ShapeOp(const std::string& name, std::vector<AttrSpec> attrs = {}, DTypeSet dtypes = kAll,
              Marking marking = Marking::kDifferentiable);

// Wraps a possibly negative `dim` into [0, rank) like PyTorch; a 0-d tensor accepts -1 and 0
// unless `allow_scalar` is false. BAD_ATTRIBUTE names the op, attribute, value and rank.
absl::StatusOr<int64_t> WrapDim(const std::string& op, const std::string& attr, int64_t dim,
                                int64_t rank, bool allow_scalar = true);

// SHAPE_MISMATCH for ops that need at least one dimension (narrow, slice, split, cat).
absl::Status RequireDims(const std::string& op, const Shape& shape);

// permute's dims checked to be a permutation of [0, rank), negatives wrapped.
absl::StatusOr<std::vector<int64_t>> NormalizePermutation(const std::string& op,
                                                          const std::vector<int64_t>& dims,
                                                          int64_t rank);

// The permutation transpose's dim0/dim1 make of [0, rank) (the identity for a 0-d tensor).
absl::StatusOr<std::vector<int64_t>> TransposePermutation(const Attrs& attrs, int64_t rank);

// Length of each piece of split/chunk along a dim of `size` elements.
absl::StatusOr<std::vector<int64_t>> SplitSizes(const std::string& op, const Attrs& attrs,
                                                int64_t size);

// A normalised slice along one dim: output element i reads input element start + i * step.
struct SliceSpec {
  int64_t dim = 0;
  int64_t start = 0;
  int64_t length = 0;
  int64_t step = 1;
};
// From slice's attributes (dim, start, end, step) with Python clamping.
absl::StatusOr<SliceSpec> ResolveSlice(const Shape& in, const Attrs& attrs);
// From narrow's attributes (dim, start, length).
absl::StatusOr<SliceSpec> ResolveNarrow(const Shape& in, const Attrs& attrs);

// DTYPE_MISMATCH unless `index` is i32 or i64.
absl::Status CheckIndexDtype(const std::string& op, const TensorMeta& index);

// flip's dims, wrapped and checked to be distinct.
absl::StatusOr<std::vector<int64_t>> FlipDims(const Shape& in, const Attrs& attrs);

// roll as a roll of `shape` (the input's, or its flattened [numel] when dims is absent) by
// `shifts[d]` in [0, shape[d]) along every dim d.
struct RollSpec {
  Shape shape;
  std::vector<int64_t> shifts;
};
absl::StatusOr<RollSpec> ResolveRoll(const Shape& in, const Attrs& attrs);

// Per-dim repeat counts of repeat ("repeats") and tile ("dims"), at least one per input dim;
// the input is read as if it had leading 1s up to their number.
absl::StatusOr<std::vector<int64_t>> ResolveRepeats(const std::string& op, const Shape& in,
                                                    const Attrs& attrs);

// pad's attributes resolved per input dim: elements added before and after (negative: cut).
struct PadSpec {
  std::vector<int64_t> before, after;
  std::string mode;
  Shape out;
};
absl::StatusOr<PadSpec> ResolvePad(const std::string& op, const Shape& in, const Attrs& attrs);

}  // namespace ops
}  // namespace tensord
