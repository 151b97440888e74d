// Server limits that bound what one request may make the server allocate or hold. Each is
// checked before anything is allocated, and a refusal names the limit, the value and the
// maximum (LIMIT_EXCEEDED, metadata limit/value/max), so a client can tell which one it hit.
// No gRPC here.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/core/dtype.h"
#include "server/core/shape.h"

namespace tensord {

struct ServiceLimits {
  // One tensor, wherever it comes from: a put, a literal, an op output, a gradient.
  int64_t max_tensor_bytes = int64_t{16} << 30;
  // Dimensions of one tensor, and the size of any one dimension (even of an empty tensor,
  // whose byte count says nothing about its dims).
  int64_t max_rank = 32;
  int64_t max_dim = int64_t{1} << 34;
  // Calls in one Execute batch.
  int64_t max_calls_per_batch = 10000;
  // Autodiff contexts open at once in one session (closed ones do not count).
  int64_t max_contexts_per_session = 256;
  // Calls of one program (forward and updates), and programs one session holds at once.
  int64_t max_calls_per_program = 10000;
  int64_t max_programs_per_session = 256;
  // Shared memory regions one session holds registered at once (each keeps a file open).
  int64_t max_shared_memory_regions_per_session = 64;
};

// INVALID_ARGUMENT naming the first limit that is not positive.
absl::Status ValidateLimits(const ServiceLimits& limits);

// LIMIT_EXCEEDED: "`what`: <detail> = <value>, above the limit <limit> = <max>", metadata
// limit, value and max.
absl::Status LimitError(absl::string_view what, absl::string_view limit, int64_t value, int64_t max,
                        absl::string_view detail);

// Rank, each dimension (negative: SHAPE_MISMATCH), element-count and byte-count overflow
// (LIMIT_EXCEEDED element_count) and max_tensor_bytes of a tensor about to be created.
// `what` names the caller ("put", "literal", ...).
absl::Status CheckTensorLimits(const ServiceLimits& limits, DType dtype, const Shape& shape,
                               absl::string_view what);

// Rank and dimensions above the limits only (negative dims are left to the shape rules, as
// reshape's -1): for shape attributes before a call and op outputs after it.
absl::Status CheckShapeLimits(const ServiceLimits& limits, const Shape& shape,
                              absl::string_view what);

}  // namespace tensord
