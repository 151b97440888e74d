// CUDA C as the kernel generator renders it (gpu/codegen), and the NVRTC options the CUDA
// runtime compiles it with. No CUDA header: the dialect is strings.
#pragma once

#include <string>
#include <vector>

#include "server/backends/gpu/codegen/kernel_source.h"

namespace tensord::cuda {

// Kernels are `extern "C" __global__` (unmangled names), with no address-space qualifier, a
// 64-bit global index, work groups as blocks (__shared__, __syncthreads), and a preamble that
// gives the OpenCL C spellings the templates use (uchar ... ulong, INFINITY, NAN, bit casts).
const gpu::Dialect& Dialect();
// The same with float as its wide type (TENSORD_GPU_FP64=off: the kernels then take their WIDE
// arguments as float, as the host passes them).
const gpu::Dialect& DialectWithoutFp64();

// NVRTC options for compute capability `arch` ("90" for sm_90): helpers without a qualifier
// are device functions (-default-device).
std::vector<std::string> NvrtcOptions(const std::string& arch);

}  // namespace tensord::cuda
