// The precision a session allows float32 matrix products to compute in, PyTorch's
// torch.set_float32_matmul_precision: "highest" (the default) computes in f32; "high" lets a
// device use TensorFloat-32 (10-bit mantissa products, f32 sums) where it has it, "medium"
// bfloat16 products too. Only the CUDA runtime's GEMM reads it; the CPU and OpenCL compute in
// f32 whatever the session allows, so their results never depend on it.
//
// A session's calls run under a MatmulPrecisionScope set for the call by the service (as their
// stream, stream_scope.h); work outside any scope computes at "highest".
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/core/thread_scope.h"

namespace tensord {

enum class MatmulPrecision { kHighest, kHigh, kMedium };

// "highest", "high", "medium" ("" is "highest"); INVALID_REQUEST naming `field` otherwise.
absl::StatusOr<MatmulPrecision> ParseMatmulPrecision(absl::string_view text,
                                                     absl::string_view field);
const char* MatmulPrecisionName(MatmulPrecision p);

// Sets the calling thread's precision until destroyed (thread_scope.h); Current() is kHighest
// outside any scope.
using MatmulPrecisionScope = ThreadScope<MatmulPrecision, MatmulPrecision::kHighest>;

}  // namespace tensord
