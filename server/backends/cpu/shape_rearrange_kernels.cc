// Kernels for flip, roll, repeat, tile, tril and triu. The first four are strided copies:
// flip reads with negative strides, roll copies 2^k blocks (each rolled dim splits in two),
// repeat reads the input with stride 0 along the repeat counts.
#include <cstring>

#include "server/backends/cpu/shape_kernels.h"
#include "server/backends/cpu/strided_copy.h"
#include "server/ops/shape_ops.h"

namespace tensord::cpu {
namespace {

absl::Status FlipKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ops::FlipDims(x.shape(), c.attrs));
  std::vector<int64_t> strides = ContiguousStrides(x.shape());
  int64_t offset = 0;
  for (int64_t d : dims) {
    if (x.dim(d) == 0) return absl::OkStatus();  // nothing to copy
    offset += (x.dim(d) - 1) * strides[d];
    strides[d] = -strides[d];
  }
  CopyFromWindow(x, offset, strides, c.outputs[0]);
  return absl::OkStatus();
}

// out[i] = in[(i - shift) mod n] per dim: along dim d, out[s, n) comes from in[0, n - s) and
// out[0, s) from in[n - s, n). Each combination of halves is one strided block copy.
absl::Status RollKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  if (x.numel() == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(ops::RollSpec spec, ops::ResolveRoll(x.shape(), c.attrs));
  const size_t es = DTypeSize(x.dtype());
  const std::vector<int64_t> strides = ContiguousStrides(spec.shape);
  const size_t rank = spec.shape.size();
  std::vector<size_t> rolled;
  for (size_t d = 0; d < rank; ++d) {
    if (spec.shifts[d] != 0) rolled.push_back(d);
  }
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(c.outputs[0].raw());
  for (uint64_t halves = 0; halves < (uint64_t{1} << rolled.size()); ++halves) {
    Shape block = spec.shape;
    int64_t from = 0, to = 0;
    for (size_t i = 0; i < rolled.size(); ++i) {
      const size_t d = rolled[i];
      const int64_t n = spec.shape[d], s = spec.shifts[d];
      if (halves >> i & 1) {
        block[d] = s;
        from += (n - s) * strides[d];
      } else {
        block[d] = n - s;
        to += s * strides[d];
      }
    }
    StridedCopy(es, block, src + from * es, strides, dst + to * es, strides);
  }
  return absl::OkStatus();
}

// The output viewed as [r0, s0, r1, s1, ...] (s: the input's shape with leading 1s) reads the
// input at stride 0 along every r dim.
absl::Status RepeatKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> repeats,
                   ops::ResolveRepeats(c.op.name, x.shape(), c.attrs));
  const size_t rank = repeats.size();
  Shape in(rank - x.shape().size(), 1);
  in.insert(in.end(), x.shape().begin(), x.shape().end());
  const std::vector<int64_t> in_strides = ContiguousStrides(in);
  const std::vector<int64_t> out_strides = ContiguousStrides(out.shape());
  Shape walk;
  std::vector<int64_t> src, dst;
  for (size_t d = 0; d < rank; ++d) {
    walk.insert(walk.end(), {repeats[d], in[d]});
    src.insert(src.end(), {0, in_strides[d]});
    dst.insert(dst.end(), {out_strides[d] * in[d], out_strides[d]});
  }
  StridedCopy(DTypeSize(x.dtype()), walk, x.raw(), src, out.raw(), dst);
  return absl::OkStatus();
}

// tril keeps col - row <= diagonal, triu keeps col - row >= diagonal, per matrix of the last
// two dims; the rest is zero (false).
absl::Status TriangleKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  const bool lower = c.op.name == "tril";
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

void RegisterShapeRearrangeKernels(KernelTable& t) {
  t.Add("flip", "strided_flip", kAll, FlipKernel);
  t.Add("roll", "strided_roll", kAll, RollKernel);
  t.Add("repeat", "strided_repeat", kAll, RepeatKernel);
  t.Add("tile", "strided_repeat", kAll, RepeatKernel);
  t.Add("tril", "loop_triangle", kAll, TriangleKernel);
  t.Add("triu", "loop_triangle", kAll, TriangleKernel);
}

}  // namespace tensord::cpu
