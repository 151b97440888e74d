#include "server/service/limits.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"

namespace tensord {

absl::Status ValidateLimits(const ServiceLimits& l) {
  const std::pair<const char*, int64_t> positive[] = {
      {"max_tensor_bytes", l.max_tensor_bytes},
      {"max_rank", l.max_rank},
      {"max_dim", l.max_dim},
      {"max_calls_per_batch", l.max_calls_per_batch},
      {"max_contexts_per_session", l.max_contexts_per_session},
      {"max_calls_per_program", l.max_calls_per_program},
      {"max_programs_per_session", l.max_programs_per_session},
      {"max_shared_memory_regions_per_session", l.max_shared_memory_regions_per_session},
  };
  for (const auto& [name, value] : positive) {
    if (value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("server: ", name, " must be positive, got ", value));
    }
  }
  return absl::OkStatus();
}

absl::Status LimitError(absl::string_view what, absl::string_view limit, int64_t value, int64_t max,
                        absl::string_view detail) {
  return Error(
      Reason::kLimitExceeded,
      absl::StrCat(what, ": ", detail, " = ", value, ", above the limit ", limit, " = ", max),
      {{"limit", std::string(limit)}, {"value", absl::StrCat(value)}, {"max", absl::StrCat(max)}});
}

absl::Status CheckShapeLimits(const ServiceLimits& limits, const Shape& shape,
                              absl::string_view what) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank > limits.max_rank) {
    return WithMetadata(LimitError(what, "max_rank", rank, limits.max_rank, "rank"),
                        {{"shape_rank", absl::StrCat(rank)}});
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] > limits.max_dim) {
      return WithMetadata(LimitError(what, "max_dim", shape[d], limits.max_dim,
                                     absl::StrCat("size of dimension ", d)),
                          {{"dim", absl::StrCat(d)}, {"shape", ShapeToString(shape)}});
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTensorLimits(const ServiceLimits& limits, DType dtype, const Shape& shape,
                               absl::string_view what) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) {
      return Error(Reason::kShapeMismatch,
                   absl::StrCat(what, ": negative dimension ", shape[d], " at dim ", d,
                                " of shape ", ShapeToString(shape)),
                   {{"shape", ShapeToString(shape)}, {"dim", absl::StrCat(d)}});
    }
  }
  RETURN_IF_ERROR(CheckShapeLimits(limits, shape, what));
  // Dims are within [0, max_dim] here; the product may still overflow int64. An empty tensor
  // is held to the same bound over its non-zero dimensions: its strides multiply them.
  int64_t n = 1;
  bool empty = false;
  int64_t bytes = 0;
  for (int64_t d : shape) {
    empty |= d == 0;
    if (d != 0 && __builtin_mul_overflow(n, d, &n)) {
      return Error(Reason::kLimitExceeded,
                   absl::StrCat(what, ": the element count of shape ", ShapeToString(shape),
                                " (zero dimensions aside) overflows a 64-bit integer"),
                   {{"limit", "element_count"},
                    {"shape", ShapeToString(shape)},
                    {"max", absl::StrCat(std::numeric_limits<int64_t>::max())}});
    }
  }
  if (!empty) {
    const int64_t size = static_cast<int64_t>(DTypeSize(dtype));
    if (__builtin_mul_overflow(n, size, &bytes)) {
      return Error(Reason::kLimitExceeded,
                   absl::StrCat(what, ": ", n, " elements of ", DTypeName(dtype),
                                " overflow a 64-bit byte count (shape ", ShapeToString(shape), ")"),
                   {{"limit", "element_count"},
                    {"shape", ShapeToString(shape)},
                    {"dtype", std::string(DTypeName(dtype))},
                    {"value", absl::StrCat(n)}});
    }
  }
  if (bytes > limits.max_tensor_bytes) {
    return WithMetadata(
        LimitError(what, "max_tensor_bytes", bytes, limits.max_tensor_bytes,
                   absl::StrCat("bytes of a ", DTypeName(dtype), " tensor of shape ",
                                ShapeToString(shape))),
        {{"shape", ShapeToString(shape)}, {"dtype", std::string(DTypeName(dtype))}});
  }
  return absl::OkStatus();
}

}  // namespace tensord
