// The narrow interface every compute backend implements (cf. ggml's backend device API):
// a capability check, allocation, host copies, run, synchronize. Not one virtual per op.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/core/tensor.h"
#include "server/ops/op_def.h"

namespace tensord {

struct DeviceInfo {
  std::string name;  // "cpu", "cuda:0"
  std::string kind;  // "cpu", "cuda"
  std::string description;
  int64_t memory_bytes = 0;  // 0 when unknown
};

// Everything a kernel needs for one call. Outputs are allocated by the dispatcher from the
// inferred metadata, except outputs with a -1 dimension, which the kernel allocates itself
// (through `account`, so data-dependent outputs are charged to the session too).
struct KernelCall {
  const OpDef& op;
  absl::Span<const Tensor> inputs;
  const Attrs& attrs;
  std::vector<Tensor>& outputs;
  absl::Span<const TensorMeta> output_metas;  // as inferred (-1 dims for data-dependent)
  std::shared_ptr<MemoryAccount> account;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string kind() const = 0;
  virtual std::vector<DeviceInfo> Devices() const = 0;
  // True when some kernel of this backend runs `op` on inputs of these dtypes.
  virtual bool Supports(const OpDef& op, absl::Span<const DType> input_dtypes) const = 0;
  // True when some kernel of this backend runs `op` for some dtypes (capability listing).
  virtual bool Implements(const OpDef& op) const = 0;
  virtual absl::StatusOr<Tensor> Allocate(DType dtype, Shape shape, const std::string& device,
                                          std::shared_ptr<MemoryAccount> account) = 0;
  virtual absl::Status CopyFromHost(const void* src, size_t bytes, Tensor& dst) = 0;
  virtual absl::Status CopyToHost(const Tensor& src, void* dst) = 0;
  virtual absl::Status Run(KernelCall& call) = 0;
  virtual absl::Status Synchronize() { return absl::OkStatus(); }
};

}  // namespace tensord
