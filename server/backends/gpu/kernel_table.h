// A GPU backend's kernels, keyed by the op's definition: each op family registers, once at
// start-up and by the op's name in the built-in catalog, the function that plans and launches
// its calls and the rules of what it takes. A call finds its kernel by OpDef::id, so nothing
// below the dispatcher compares op names: what differs between the ops of a family (tril or
// triu, sort or topk) is bound into the function when it is registered.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/backends/backend.h"
#include "server/backends/gpu/device_runtime.h"

namespace tensord::gpu {

struct ElementwiseForm;  // codegen/elementwise_exprs.h

using GpuKernelFn = std::function<absl::Status(KernelCall& call, DeviceRuntime& device)>;
// Whether the kernel runs a call described with everything the dispatcher knows (attributes,
// input and output metadata) on `device`, beyond the rules every kernel shares.
using GpuPredicate = std::function<bool(const KernelQuery& query, const DeviceRuntime& device)>;

struct GpuKernel {
  GpuKernelFn run;
  // Moves the bits of storage dtypes (bf16, f16, u8, i8, i16) as they are: fills, views,
  // copies, gathers, selections. The others see f32 or i32 (the dispatcher converts).
  bool moves_bits = false;
  // Computes in double whatever the dtype (the creation ops' streams, as the CPU draws them):
  // refused on a device without fp64.
  bool needs_fp64 = false;
  // Null: every call the rules above admit.
  GpuPredicate supports;
  // The generated map it runs (elementwise_kernels.cc), or null: a step of a fused expression
  // computes that same map (fused_elementwise_kernels.cc).
  const ElementwiseForm* form = nullptr;
};

// The kernel that runs fn(call, device, bound...): what tells a family's ops apart, bound at
// registration.
template <typename Fn, typename... Bound>
GpuKernel KernelOf(Fn fn, Bound... bound) {
  GpuKernel k;
  k.run = [fn, bound...](KernelCall& c, DeviceRuntime& device) { return fn(c, device, bound...); };
  return k;
}

// `k` marked as moving storage bits as they are (GpuKernel::moves_bits).
inline GpuKernel MovingBits(GpuKernel k) {
  k.moves_bits = true;
  return k;
}

class GpuKernelTable {
 public:
  static const GpuKernelTable& Get();
  // Registers the kernel of the built-in op named `op`; an unknown name or a second kernel for
  // one op stops the process at start-up.
  void Add(const std::string& op, GpuKernel kernel);
  // The kernel of `op`, or null (no GPU kernel; every op that is not built in).
  const GpuKernel* Find(const OpDef& op) const;
  // The kernel that runs the call described on `device` (see Backend::Plan), or null: the
  // op's kernel, then the rules every kernel shares (no f64 on a device without fp64, storage
  // dtypes only where the kernel moves bits), then the kernel's own predicate.
  const GpuKernel* Plan(const KernelQuery& query, const DeviceRuntime& device) const;

 private:
  std::vector<GpuKernel> kernels_;  // indexed by OpDef::id; run is null where there is none
};

// Family registration, one per kernel file. Fills, views and copies register first and the
// elementwise maps last, for the ops no other family runs (elementwise_kernels.cc).
void RegisterCopyKernels(GpuKernelTable& t);
void RegisterElementwiseKernels(GpuKernelTable& t);
void RegisterFusedElementwiseKernels(GpuKernelTable& t);  // after the elementwise maps
void RegisterFusedProductKernels(GpuKernelTable& t);      // after their producers
void RegisterLayoutKernels(GpuKernelTable& t);
void RegisterIndexingKernels(GpuKernelTable& t);
void RegisterReductionKernels(GpuKernelTable& t);
void RegisterNormKernels(GpuKernelTable& t);
void RegisterConvKernels(GpuKernelTable& t);
void RegisterPoolKernels(GpuKernelTable& t);
void RegisterCreationKernels(GpuKernelTable& t);
void RegisterLossKernels(GpuKernelTable& t);
void RegisterSortKernels(GpuKernelTable& t);
void RegisterActivationKernels(GpuKernelTable& t);
void RegisterResampleKernels(GpuKernelTable& t);
void RegisterCrossEntropyKernels(GpuKernelTable& t);
void RegisterLinalgKernels(GpuKernelTable& t);
void RegisterOptimizerKernels(GpuKernelTable& t);
void RegisterSelectKernels(GpuKernelTable& t);

}  // namespace tensord::gpu
