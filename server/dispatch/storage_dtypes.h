// Storage dtype semantics for the dispatcher: an op on bf16/f16 tensors that no kernel of the
// backend takes directly runs in f32 and its float outputs are rounded back, the way PyTorch's
// CPU kernels compute bf16/f16 in float ("opmath") and store the result in 2 bytes; an op on
// u8/i8/i16 tensors runs in i32 and its outputs are stored back in the narrow dtype, which wraps
// exactly as PyTorch's narrow integer kernels do (the low bits of a sum, difference, product,
// shift or negation do not depend on the width it was computed in).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/ops/op_def.h"

namespace tensord {

class Dispatcher;
struct CallEnv;

// Runs `def` on `inputs` (promoted, without autodiff identity) in the compute dtypes when a
// storage dtype is involved (an input, or a "dtype" attribute) and the backend of `device` has
// no kernel taking it:
//  1. storage inputs are cast to their ComputeDType and storage dtype attributes read it;
//  2. the op runs through `dispatcher` on those (no recording: the caller records the call on
//     its original tensors, so gradients come back in the inputs' dtypes and backward rules,
//     which run through the dispatcher, get the same treatment);
//  3. outputs are cast to the dtypes the op's rule infers for the original call (for a
//     creation op whose rule rejects a storage dtype, to the dtype the attribute names).
// Returns nullopt when the call should run as is: no storage dtype involved, a kernel that
// takes them exists, or the op is to_dtype (the conversion primitive every backend implements).
absl::StatusOr<std::optional<std::vector<Tensor>>> RunStorageDTypesWidened(
    const Dispatcher& dispatcher, const OpDef& def, const std::vector<Tensor>& inputs,
    const Attrs& attrs, const std::string& device, const CallEnv& env);

}  // namespace tensord
