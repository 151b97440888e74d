// Loop kernels for elementwise ops (inputs arrive promoted to one dtype).
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"

namespace tensord::cpu {
namespace {

// Registers `op` for numeric dtypes with f(a, b) computed in T.
template <typename F>
void AddBinary(KernelTable& t, const std::string& op, DTypeSet dtypes, F f) {
  t.Add(op, "loop_" + op, dtypes, [f](KernelCall& c) {
    TENSORD_DISPATCH_ALL(c.outputs[0].dtype(), [&] {
      BinaryLoop<T, T, T>(c.inputs[0], c.inputs[1], c.outputs[0],
                          [&](T a, T b) { return static_cast<T>(f(a, b, c.attrs)); });
    });
    return absl::OkStatus();
  });
}

}  // namespace

void RegisterElementwiseKernels(KernelTable& t) {
  AddBinary(t, "add", kFloatInt, [](auto a, auto b, const Attrs& at) {
    using T = decltype(a);
    const double alpha = at.GetFloat("alpha", 1.0);
    return alpha == 1.0 ? a + b : static_cast<T>(a + alpha * b);
  });
  AddBinary(t, "mul", kFloatInt, [](auto a, auto b, const Attrs&) { return a * b; });
}

}  // namespace tensord::cpu
