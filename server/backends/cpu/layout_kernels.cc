// The kernels of the layout ops. cat, stack, split, chunk, narrow, slice, slice_backward, flip,
// roll, repeat, tile, diagonal and diagonal_backward run the copies of their shared plan
// (server/ops/layout_plan.h) as strided byte copies, so every dtype moves bit for bit; tril
// and triu mask the last two dims.
#include <cstring>
#include <string>
#include <vector>

#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/shape_kernels.h"
#include "server/backends/cpu/strided_copy.h"
#include "server/ops/layout_plan.h"

namespace tensord::cpu {
namespace {

absl::Status LayoutKernel(KernelCall& c) {
  std::vector<Shape> in, out;
  for (const Tensor& t : c.inputs) in.push_back(t.shape());
  for (const Tensor& t : c.outputs) out.push_back(t.shape());
  ASSIGN_OR_RETURN(ops::LayoutPlan plan, ops::PlanLayout(c.op.name, in, out, c.attrs));
  if (plan.zero_outputs) {
    for (Tensor& t : c.outputs) {
      if (t.nbytes()) std::memset(t.raw(), 0, t.nbytes());
    }
  }
  for (const ops::WindowCopy& w : plan.copies) {
    const Tensor& src = c.inputs[w.input];
    const size_t es = DTypeSize(src.dtype());
    StridedCopy(es, w.shape, static_cast<const char*>(src.raw()) + w.src_offset * es, w.src_strides,
                static_cast<char*>(c.outputs[w.output].raw()) + w.dst_offset * es, w.dst_strides);
  }
  return absl::OkStatus();
}

// tril keeps col - row <= diagonal, triu keeps col - row >= diagonal, per matrix of the last
// two dims; the rest is zero (false).
absl::Status TriangleKernel(KernelCall& c, bool lower) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  const int64_t k = c.attrs.GetInt("diagonal");
  const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  const int64_t matrices = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    const T* p = x.data<T>();
    T* q = out.data<T>();
    for (int64_t m = 0; m < matrices; ++m) {
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t at = (m * rows + i) * cols;
        for (int64_t j = 0; j < cols; ++j) {
          // j - i is small; comparing it with k cannot overflow whatever k is.
          const bool keep = lower ? j - i <= k : j - i >= k;
          q[at + j] = keep ? p[at + j] : T(0);
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterLayoutKernels(KernelTable& t) {
  for (const char* op :
       {"cat", "stack", "split", "chunk", "narrow", "slice", "flip", "roll", "repeat", "tile"}) {
    t.Add(op, std::string("strided_") + op, kAll, LayoutKernel);
  }
  t.Add("slice_backward", "strided_slice_backward", kFloatInt, LayoutKernel);
  for (const char* op : {"diagonal", "diagonal_backward"}) {
    t.Add(op, std::string("strided_") + op, kFloat | kLowPrecision, LayoutKernel);
  }
  t.Add("tril", "loop_triangle", kAll, [](KernelCall& c) { return TriangleKernel(c, true); });
  t.Add("triu", "loop_triangle", kAll, [](KernelCall& c) { return TriangleKernel(c, false); });
}

}  // namespace tensord::cpu
