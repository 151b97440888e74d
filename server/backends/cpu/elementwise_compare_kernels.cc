// Loop kernels for comparisons and logical ops: promoted inputs of any dtype, bool output.
#include "server/backends/cpu/elementwise_dispatch.h"
#include "server/backends/cpu/elementwise_kernels.h"
#include "server/backends/cpu/loops.h"

namespace tensord::cpu {
namespace {

template <typename Op>
absl::Status CompareKernel(KernelCall& c) {
  VisitDType<kFIB>(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    BinaryLoop<T, T, bool>(c.inputs[0], c.inputs[1], c.outputs[0], Op{});
  });
  return absl::OkStatus();
}

// C++ comparisons already have IEEE semantics: NaN compares unequal to everything.
struct Eq {
  template <typename T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};
struct Ne {
  template <typename T>
  bool operator()(T a, T b) const {
    return a != b;
  }
};
struct Lt {
  template <typename T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct Le {
  template <typename T>
  bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct Gt {
  template <typename T>
  bool operator()(T a, T b) const {
    return a > b;
  }
};
struct Ge {
  template <typename T>
  bool operator()(T a, T b) const {
    return a >= b;
  }
};
// Logical ops treat every nonzero value (NaN included) as true, like PyTorch.
struct And {
  template <typename T>
  bool operator()(T a, T b) const {
    return (a != T(0)) & (b != T(0));
  }
};
struct Or {
  template <typename T>
  bool operator()(T a, T b) const {
    return (a != T(0)) | (b != T(0));
  }
};
struct Xor {
  template <typename T>
  bool operator()(T a, T b) const {
    return (a != T(0)) != (b != T(0));
  }
};

}  // namespace

void RegisterComparisonKernels(KernelTable& t) {
  t.Add("eq", "loop_eq", kAll, CompareKernel<Eq>);
  t.Add("ne", "loop_ne", kAll, CompareKernel<Ne>);
  t.Add("lt", "loop_lt", kAll, CompareKernel<Lt>);
  t.Add("le", "loop_le", kAll, CompareKernel<Le>);
  t.Add("gt", "loop_gt", kAll, CompareKernel<Gt>);
  t.Add("ge", "loop_ge", kAll, CompareKernel<Ge>);
  t.Add("logical_and", "loop_logical_and", kAll, CompareKernel<And>);
  t.Add("logical_or", "loop_logical_or", kAll, CompareKernel<Or>);
  t.Add("logical_xor", "loop_logical_xor", kAll, CompareKernel<Xor>);
}

}  // namespace tensord::cpu
