// oneDNN kernels, registered ahead of the loop kernels so that they are preferred. Each claims
// only the calls whose semantics it reproduces exactly (f32, supported attributes); the rest
// fall through to the loops.
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/onednn_common.h"

namespace tensord::cpu {

void RegisterOneDnnKernels(KernelTable& t) {
  onednn::RegisterMatmulKernels(t);
  onednn::RegisterNnKernels(t);
  onednn::RegisterEltwiseKernels(t);
  onednn::RegisterBinaryKernels(t);
  onednn::RegisterFusionKernels(t);
}

}  // namespace tensord::cpu
