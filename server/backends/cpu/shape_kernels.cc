// Kernels for shape and indexing ops.
#include <cstring>

#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"

namespace tensord::cpu {
namespace {

// Views: the output shares the input's storage.
absl::Status ViewKernel(KernelCall& c) {
  c.outputs[0] = c.inputs[0].Reshaped(c.output_metas[0].shape);
  return absl::OkStatus();
}

absl::Status ExpandKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  std::vector<std::vector<int64_t>> strides = {BroadcastStrides(x.shape(), out.shape())};
  const int64_t s = strides[0].empty() ? 0 : strides[0].back();
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    const T* p = x.data<T>();
    T* q = out.data<T>();
    BroadcastWalk(out.shape(), strides,
                  [&](const std::vector<int64_t>& off, int64_t o, int64_t len) {
                    for (int64_t i = 0; i < len; ++i) q[o + i] = p[off[0] + i * s];
                  });
  });
  return absl::OkStatus();
}

absl::Status CastKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    using In = T;
    TENSORD_DISPATCH_ALL(out.dtype(), [&] {
      UnaryLoop<In, T>(x, out, [](In v) {
        if constexpr (std::is_same_v<T, bool>)
          return v != In(0);
        else
          return static_cast<T>(v);
      });
    });
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterShapeKernels(KernelTable& t) {
  t.Add("reshape", "view", kAll, ViewKernel);
  t.Add("expand", "loop_expand", kAll, ExpandKernel);
  t.Add("to_dtype", "loop_cast", kAll, CastKernel);
}

}  // namespace tensord::cpu
