// Kernels for creation ops.
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"

namespace tensord::cpu {
namespace {

void Fill(Tensor& out, double value) {
  TENSORD_DISPATCH_ALL(out.dtype(), [&] {
    T* p = out.data<T>();
    const T v = static_cast<T>(value);
    for (int64_t i = 0; i < out.numel(); ++i) p[i] = v;
  });
}

KernelFn FillWith(double value) {
  return [value](KernelCall& c) {
    Fill(c.outputs[0], value);
    return absl::OkStatus();
  };
}

absl::Status FillFromAttr(KernelCall& c) {
  Fill(c.outputs[0], c.attrs.GetFloat("value"));
  return absl::OkStatus();
}

}  // namespace

void RegisterCreationKernels(KernelTable& t) {
  t.Add("zeros", "loop_fill", kAll, FillWith(0));
  t.Add("ones", "loop_fill", kAll, FillWith(1));
  t.Add("full", "loop_fill", kAll, FillFromAttr);
  t.Add("zeros_like", "loop_fill", kAll, FillWith(0));
  t.Add("ones_like", "loop_fill", kAll, FillWith(1));
  t.Add("full_like", "loop_fill", kAll, FillFromAttr);
}

}  // namespace tensord::cpu
