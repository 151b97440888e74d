// Loop max/avg pooling and their gradients (max_pool2d, avg_pool2d and the adaptive pools):
// the windows of ops/nn_pool_windows.h, after PyTorch's CPU kernels, run by the shared pooling
// loops (nn_pool_windows.h, which also hold the max tie and NaN rule). The reference for every
// float dtype and the f64 path; oneDNN's pooling needs windows of one size, so these are the
// only kernels of the adaptive pools.
#include <string>
#include <utility>
#include <vector>

#include "server/backends/cpu/nn_kernels.h"
#include "server/backends/cpu/nn_pool_windows.h"
#include "server/ops/nn_geometry.h"
#include "server/ops/nn_pool_windows.h"

namespace tensord::cpu {
namespace {

// The input, output and windows of a pooling call: the forward reads inputs[0] and writes
// outputs[0]; a _backward op reads (grad_output, input) and writes the input's gradient.
struct Pooling {
  nn::Nchw x, y;
  std::vector<PoolWindow> windows;
};
absl::StatusOr<Pooling> Plan(const KernelCall& c, bool backward) {
  Pooling p;
  p.x = nn::AsNchw(backward ? c.inputs[1].shape() : c.inputs[0].shape());
  p.y = nn::AsNchw(backward ? c.inputs[0].shape() : c.outputs[0].shape());
  ASSIGN_OR_RETURN(p.windows, nn::PoolWindows(c.op.name, c.attrs, p.x, p.y));
  return p;
}

template <typename T>
absl::Status Forward(KernelCall& c, bool max) {
  ASSIGN_OR_RETURN(Pooling p, Plan(c, false));
  if (max) {
    MaxPoolForward(c.inputs[0].data<T>(), c.outputs[0].data<T>(), PoolIndices(c), p.x, p.y,
                   p.windows);
  } else {
    AvgPoolForward(c.inputs[0].data<T>(), c.outputs[0].data<T>(), p.x, p.y, p.windows);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Backward(KernelCall& c, bool max) {
  ASSIGN_OR_RETURN(Pooling p, Plan(c, true));
  if (max) {
    MaxPoolBackward(c.inputs[0].data<T>(), c.inputs[1].data<T>(), c.outputs[0].data<T>(), p.x, p.y,
                    p.windows);
  } else {
    AvgPoolBackward(c.inputs[0].data<T>(), c.outputs[0].data<T>(), p.x, p.y, p.windows);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoopPool2d(KernelCall& c, bool max) {
  return c.inputs[0].dtype() == DType::kF32 ? Forward<float>(c, max) : Forward<double>(c, max);
}
absl::Status LoopPool2dBackward(KernelCall& c, bool max) {
  return c.inputs[0].dtype() == DType::kF32 ? Backward<float>(c, max) : Backward<double>(c, max);
}

void RegisterPoolKernels(KernelTable& t) {
  for (const auto& [op, max] :
       {std::pair{"max_pool2d", true}, std::pair{"avg_pool2d", false},
        std::pair{"adaptive_avg_pool2d", false}, std::pair{"adaptive_max_pool2d", true}}) {
    t.Add(op, std::string("loop_") + op, kFloat,
          [max = max](KernelCall& c) { return LoopPool2d(c, max); });
    t.Add(std::string(op) + "_backward", std::string("loop_") + op + "_backward", kFloat,
          [max = max](KernelCall& c) { return LoopPool2dBackward(c, max); });
  }
}

}  // namespace tensord::cpu
