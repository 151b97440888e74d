// The narrow interface every compute backend implements (cf. ggml's backend device API):
// a capability check, allocation, host copies, run, synchronize. Not one virtual per op.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/core/device_collectives.h"
#include "server/core/tensor.h"
#include "server/ops/op_def.h"

namespace tensord {

struct DeviceInfo {
  std::string name;  // "cpu", "opencl:0", "cuda:0"
  std::string kind;  // the backend kind: "cpu", "opencl", "cuda"
  std::string description;
  std::string vendor;        // "" when unknown
  int64_t memory_bytes = 0;  // 0 when unknown
};

// What a backend built for one call site (oneDNN primitives, the keys of its caches), kept by
// the caller's plan beside the site's KernelPlan and handed back whenever the site runs again
// with the same op, attributes and input types, so that the backend finds none of it again.
// Only the backend that filled it reads it; empty until then.
struct KernelMemo {
  std::shared_ptr<void> state;
};

// Everything a kernel needs for one call. Outputs are allocated by the dispatcher from the
// inferred metadata, except outputs with a -1 dimension, which the kernel allocates itself
// (through `account`, so data-dependent outputs are charged to the session too). Inputs are
// on the call's device, except 0-d host tensors (number operands), which a device kernel
// reads as values.
struct KernelCall {
  const OpDef& op;
  absl::Span<const Tensor> inputs;
  const Attrs& attrs;
  std::vector<Tensor>& outputs;
  absl::Span<const TensorMeta> output_metas;  // as inferred (-1 dims for data-dependent)
  std::shared_ptr<MemoryAccount> account;
  // The call site's memo (a planned call run again), or null.
  KernelMemo* memo = nullptr;
};

// What a capability check is asked about. The dispatcher asks with everything it knows before
// it allocates outputs, so a backend that cannot run a call refuses it before anything is
// charged; listings ask with the op alone.
struct KernelQuery {
  const OpDef& op;
  absl::Span<const DType> dtypes;             // the inputs' (plus low-precision outputs')
  const Attrs* attrs = nullptr;               // null: any attributes
  absl::Span<const TensorMeta> inputs = {};   // empty: any shapes
  absl::Span<const TensorMeta> outputs = {};  // as the op's rule inferred them, with inputs
  std::string device = {};                    // empty: any device of the backend
};

// What a backend decided for a call: the kernel that runs it, chosen once by Plan and handed
// back to Run. Only the backend that made a plan reads it.
struct KernelPlan {
  const void* kernel = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string kind() const = 0;
  virtual std::vector<DeviceInfo> Devices() const = 0;
  // Chooses the kernel that runs the call described, before anything is allocated for it;
  // UNSUPPORTED_ON_BACKEND (naming op, backend and device) when none does.
  virtual absl::StatusOr<KernelPlan> Plan(const KernelQuery& query) const = 0;
  // True when some kernel of this backend runs the call described.
  bool Supports(const KernelQuery& query) const { return Plan(query).ok(); }
  // True when some kernel of this backend runs `op` for some dtypes (capability listing).
  virtual bool Implements(const OpDef& op) const = 0;
  virtual absl::StatusOr<Tensor> Allocate(DType dtype, Shape shape, const std::string& device,
                                          std::shared_ptr<MemoryAccount> account) = 0;
  // Host bytes into a tensor of this backend (exactly dst.nbytes()), and back.
  virtual absl::Status CopyFromHost(const void* src, size_t bytes, Tensor& dst) = 0;
  virtual absl::Status CopyToHost(const Tensor& src, void* dst) = 0;
  // src into dst (same dtype and size), both tensors of this backend, on the same device or
  // on two of its devices.
  virtual absl::Status CopyOnBackend(const Tensor& src, Tensor& dst) = 0;
  // Runs the call with the kernel `plan` chose for its query (outputs allocated as inferred).
  virtual absl::Status Run(const KernelPlan& plan, KernelCall& call) = 0;
  // Waits until the work queued on `device` is done (a no-op where kernels run synchronously).
  virtual absl::Status Synchronize(const std::string& device) = 0;
  // The library that moves collectives' data between `device` and its peers' devices directly
  // (NCCL on cuda), or null: the process group then moves host copies.
  virtual DeviceCollectives* Collectives(const std::string& device) { return nullptr; }
};

}  // namespace tensord
