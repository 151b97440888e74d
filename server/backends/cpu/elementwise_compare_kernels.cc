// Loop kernels for comparisons and logical ops: promoted inputs of any dtype, bool output.
#include "server/backends/cpu/elementwise_dispatch.h"
#include "server/backends/cpu/elementwise_kernels.h"
#include "server/backends/cpu/loops.h"

namespace tensord::cpu {
namespace {

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
  t.Add("eq", "loop_eq", kAll, SameDTypeBinaryKernel<kFIB, Eq>);
  t.Add("ne", "loop_ne", kAll, SameDTypeBinaryKernel<kFIB, Ne>);
  t.Add("lt", "loop_lt", kAll, SameDTypeBinaryKernel<kFIB, Lt>);
  t.Add("le", "loop_le", kAll, SameDTypeBinaryKernel<kFIB, Le>);
  t.Add("gt", "loop_gt", kAll, SameDTypeBinaryKernel<kFIB, Gt>);
  t.Add("ge", "loop_ge", kAll, SameDTypeBinaryKernel<kFIB, Ge>);
  t.Add("logical_and", "loop_logical_and", kAll, SameDTypeBinaryKernel<kFIB, And>);
  t.Add("logical_or", "loop_logical_or", kAll, SameDTypeBinaryKernel<kFIB, Or>);
  t.Add("logical_xor", "loop_logical_xor", kAll, SameDTypeBinaryKernel<kFIB, Xor>);
}

}  // namespace tensord::cpu
