#include "server/core/shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/core/status.h"

namespace tensord {

int64_t NumElements(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  // The product of the non-zero dimensions is bounded too: an empty tensor keeps its other
  // dimensions, and the strides of [0, 2^40, 2^40] (and of views of it) would overflow.
  int64_t span = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return Error(Reason::kShapeMismatch,
                   absl::StrCat("shape: negative dimension in ", ShapeToString(shape)),
                   {{"shape", ShapeToString(shape)}});
    }
    if (d != 0 && span > (int64_t{1} << 62) / d) {
      return Error(Reason::kLimitExceeded,
                   absl::StrCat("shape: element count of ", ShapeToString(shape),
                                " overflows (zero dimensions aside)"),
                   {{"shape", ShapeToString(shape)}, {"limit", "element_count"}});
    }
    n *= d;
    if (d != 0) span *= d;
  }
  return n;
}

std::vector<int64_t> ContiguousStrides(absl::Span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

std::string ShapeToString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<Shape> BroadcastShapes(absl::Span<const int64_t> a, absl::Span<const int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return Error(Reason::kShapeMismatch,
                   absl::StrCat("broadcast: shapes ", ShapeToString(a), " and ", ShapeToString(b),
                                " are not broadcastable"),
                   {{"shape_a", ShapeToString(a)}, {"shape_b", ShapeToString(b)}});
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

absl::StatusOr<Shape> BroadcastAll(const std::vector<Shape>& shapes) {
  Shape out;
  for (const Shape& s : shapes) {
    ASSIGN_OR_RETURN(out, BroadcastShapes(out, s));
  }
  return out;
}

absl::StatusOr<int64_t> NormalizeDim(int64_t dim, int64_t rank, const char* attr) {
  int64_t r = rank == 0 ? 1 : rank;
  if (dim < -r || dim >= r) {
    return Error(
        Reason::kBadAttribute,
        absl::StrCat("attrs: ", attr, "=", dim, " is out of range for a tensor of rank ", rank),
        {{"attribute", attr}, {"value", absl::StrCat(dim)}, {"rank", absl::StrCat(rank)}});
  }
  return dim < 0 ? dim + r : dim;
}

std::vector<int64_t> BroadcastStrides(absl::Span<const int64_t> shape,
                                      absl::Span<const int64_t> out_shape) {
  std::vector<int64_t> strides(out_shape.size(), 0);
  std::vector<int64_t> own = ContiguousStrides(shape);
  size_t offset = out_shape.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    strides[offset + i] = shape[i] == 1 ? 0 : own[i];
  }
  return strides;
}

}  // namespace tensord
