// The CUDA dialect's compile check for the GPU layer (builds with the CUDA toolkit): a device
// runtime that forwards everything to a real device (opencl:0 in CI) and, for every kernel the
// GPU layer builds there, also renders it in the CUDA dialect and compiles it with NVRTC. A
// compile failure fails the kernel's call with the NVRTC log, so the tests/gpu suites, run with
// TENSORD_TEST_NVRTC=1, check that every kernel they reach compiles for a CUDA GPU too.
#pragma once

#include <memory>

#include "server/backends/gpu/device_runtime.h"

namespace tensord::testing {

// Whether this build can check (NVRTC found) and TENSORD_TEST_NVRTC=1 asks for it.
bool NvrtcCrossCompileRequested();
// `inner` with every kernel also compiled by NVRTC for sm_90.
std::shared_ptr<gpu::DeviceRuntime> CrossCompiling(std::shared_ptr<gpu::DeviceRuntime> inner);

}  // namespace tensord::testing
