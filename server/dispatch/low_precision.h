// bf16/f16 storage semantics for the dispatcher: an op on 2-byte float tensors that no kernel
// of the backend takes directly runs in f32 and its float outputs are rounded back, the way
// PyTorch's CPU kernels compute bf16/f16 in float ("opmath") and store the result in 2 bytes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/ops/op_def.h"

namespace tensord {

class Dispatcher;
struct CallEnv;

// Runs `def` on `inputs` (promoted, without autodiff identity) in f32 when a bf16/f16 dtype is
// involved (an input, or a "dtype" attribute) and the backend of `device` has no kernel
// taking it:
//  1. bf16/f16 inputs are cast to f32 and bf16/f16 dtype attributes read f32;
//  2. the op runs through `dispatcher` on those (no recording: the caller records the call on
//     its original bf16/f16 tensors, so gradients come back in the inputs' dtypes and backward
//     rules, which run through the dispatcher, get the same treatment);
//  3. float outputs are cast to the dtypes the op's rule infers for the original call (for a
//     creation op whose rule rejects a 2-byte dtype, to the dtype the attribute names).
// Returns nullopt when the call should run as is: no bf16/f16 involved, a kernel that takes
// them exists, or the op is to_dtype (the conversion primitive every backend implements).
absl::StatusOr<std::optional<std::vector<Tensor>>> RunLowPrecisionInF32(
    const Dispatcher& dispatcher, const OpDef& def, const std::vector<Tensor>& inputs,
    const Attrs& attrs, const std::string& device, const CallEnv& env);

}  // namespace tensord
