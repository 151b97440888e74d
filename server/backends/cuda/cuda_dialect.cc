#include "server/backends/cuda/cuda_dialect.h"

namespace tensord::cuda {

const gpu::Dialect& Dialect() {
  static const gpu::Dialect* d = [] {
    auto* c = new gpu::Dialect;
    c->kernel = "extern \"C\" __global__ void";
    c->global = "";
    c->global_id = "((long long)blockIdx.x * blockDim.x + threadIdx.x)";
    c->int64 = "long long";
    c->uint64 = "unsigned long long";
    c->preamble =
        "typedef unsigned char uchar;\n"
        "typedef unsigned short ushort;\n"
        "typedef unsigned int uint;\n"
        "typedef unsigned long long ulong;\n"
        "#define INFINITY __int_as_float(0x7f800000)\n"
        "#define NAN __int_as_float(0x7fffffff)\n";
    c->fp64_enable = "";
    c->as_float = "__uint_as_float";
    c->as_uint = "__float_as_uint";
    c->local = "__shared__";
    c->group_id = "blockIdx.x";
    c->local_id = "threadIdx.x";
    c->barrier = "__syncthreads()";
    return c;
  }();
  return *d;
}

const gpu::Dialect& DialectWithoutFp64() {
  static const gpu::Dialect* d = new gpu::Dialect(gpu::WithoutFp64(Dialect()));
  return *d;
}

std::vector<std::string> NvrtcOptions(const std::string& arch) {
  // No fused multiply-add contraction: results stay those of the CPU loops within the tests'
  // f64 tolerances (1e-12).
  return {"--gpu-architecture=sm_" + arch, "-default-device", "--std=c++17", "--fmad=false"};
}

}  // namespace tensord::cuda
