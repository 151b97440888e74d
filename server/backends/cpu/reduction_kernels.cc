// Loop kernels for reductions.
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"
#include "server/ops/reduction.h"

namespace tensord::cpu {

// For each input element, the flat index of the output element it reduces into.
std::vector<int64_t> ReductionTargets(const Shape& in, const std::vector<int64_t>& dims) {
  Shape kept = ReducedShape(in, dims, true);
  std::vector<int64_t> kept_strides = ContiguousStrides(kept);
  const int rank = static_cast<int>(in.size());
  std::vector<int64_t> target(NumElements(in));
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < static_cast<int64_t>(target.size()); ++i) {
    int64_t off = 0;
    for (int d = 0; d < rank; ++d) off += (kept[d] == 1 ? 0 : index[d]) * kept_strides[d];
    target[i] = off;
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < in[d]) break;
      index[d] = 0;
    }
  }
  return target;
}

namespace {

absl::Status SumKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  ASSIGN_OR_RETURN(auto dims, ReductionDims("sum", c.attrs, x.rank()));
  // Accumulate in double (floats) or int64 (integers) for accuracy, then narrow.
  std::vector<double> facc;
  std::vector<int64_t> iacc;
  const bool float_acc = IsFloat(out.dtype());
  if (float_acc)
    facc.assign(out.numel(), 0.0);
  else
    iacc.assign(out.numel(), 0);
  const int64_t n = x.numel();
  const bool all = static_cast<int64_t>(dims.size()) == x.rank();
  std::vector<int64_t> target = all ? std::vector<int64_t>() : ReductionTargets(x.shape(), dims);
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t o = all ? 0 : target[i];
      if (float_acc)
        facc[o] += static_cast<double>(p[i]);
      else
        iacc[o] += static_cast<int64_t>(p[i]);
    }
  });
  TENSORD_DISPATCH_ALL(out.dtype(), [&] {
    T* q = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      q[i] = float_acc ? static_cast<T>(facc[i]) : static_cast<T>(iacc[i]);
    }
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterReductionKernels(KernelTable& t) { t.Add("sum", "loop_sum", kAll, SumKernel); }

}  // namespace tensord::cpu
