// The CUDA dialect's compile check in a build without the CUDA toolkit: nothing to check.
#include "tests/gpu/nvrtc_cross_compile.h"

namespace tensord::testing {

bool NvrtcCrossCompileRequested() { return false; }

std::shared_ptr<gpu::DeviceRuntime> CrossCompiling(std::shared_ptr<gpu::DeviceRuntime> inner) {
  return inner;
}

}  // namespace tensord::testing
