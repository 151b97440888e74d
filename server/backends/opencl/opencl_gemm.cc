// The OpenCL runtime's GEMM: CLBlast's strided batched GEMM on the calling stream's queue, and the
// OpenCL C dialect the generated kernels are rendered in.
#include <clblast.h>

#include "absl/strings/str_cat.h"
#include "server/backends/opencl/opencl_runtime.h"
#include "server/core/status.h"

namespace tensord::opencl {
namespace {

template <typename T>
clblast::StatusCode StridedBatched(const gpu::GemmShape& g, cl_mem a, cl_mem b, cl_mem c,
                                   cl_command_queue queue) {
  using clblast::Layout;
  using clblast::Transpose;
  const size_t lda = g.transpose_a ? g.rows : g.inner;
  const size_t ldb = g.transpose_b ? g.inner : g.cols;
  return clblast::GemmStridedBatched<T>(
      Layout::kRowMajor, g.transpose_a ? Transpose::kYes : Transpose::kNo,
      g.transpose_b ? Transpose::kYes : Transpose::kNo, g.rows, g.cols, g.inner, T(1), a,
      g.a_offset, lda, g.a_stride, b, g.b_offset, ldb, g.b_stride, T(g.accumulate ? 1 : 0), c,
      g.c_offset, g.cols, g.rows * g.cols, g.batch, &queue);
}

}  // namespace

const gpu::Dialect& Dialect() {
  static const gpu::Dialect* d = [] {
    auto* c = new gpu::Dialect;
    c->kernel = "__kernel void";
    // No fused multiply-add contraction (NVRTC's --fmad=false likewise): each product is
    // rounded where the CPU loops round it, and a fused expression's steps give the values
    // their own kernels store.
    c->preamble = "#pragma OPENCL FP_CONTRACT OFF\n";
    c->global = "__global";
    c->global_id = "get_global_id(0)";
    c->int64 = "long";
    c->uint64 = "ulong";
    c->fp64_enable = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    c->as_float = "as_float";
    c->as_uint = "as_uint";
    c->local = "__local";
    c->group_id = "get_group_id(0)";
    c->local_id = "get_local_id(0)";
    c->barrier = "barrier(CLK_LOCAL_MEM_FENCE)";
    return c;
  }();
  return *d;
}

const gpu::Dialect& DialectWithoutFp64() {
  static const gpu::Dialect* d = new gpu::Dialect(gpu::WithoutFp64(Dialect()));
  return *d;
}

absl::Status ClDevice::Gemm(const gpu::GemmShape& shape, const void* a, const void* b, void* c,
                            const void* bias) {
  // CLBlast adds no bias (GemmAddsBias is false) and computes f32 in f32 at every precision.
  if (bias != nullptr) {
    return Error(Reason::kInternal, absl::StrCat(name_, ": CLBlast GEMM given a bias"),
                 {{"device", name_}});
  }
  cl_mem am = static_cast<cl_mem>(const_cast<void*>(a));
  cl_mem bm = static_cast<cl_mem>(const_cast<void*>(b));
  cl_mem cm = static_cast<cl_mem>(c);
  ASSIGN_OR_RETURN(cl_command_queue queue, QueueFor({a, b, c}));
  const clblast::StatusCode status = shape.dtype == DType::kF64
                                         ? StridedBatched<double>(shape, am, bm, cm, queue)
                                         : StridedBatched<float>(shape, am, bm, cm, queue);
  if (status != clblast::StatusCode::kSuccess) {
    return Error(
        Reason::kInternal,
        absl::StrCat(name_, ": CLBlast GEMM failed (status ", static_cast<int>(status), ")"),
        {{"device", name_}});
  }
  return absl::OkStatus();
}

}  // namespace tensord::opencl
