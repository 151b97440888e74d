// Work-group tree reductions (gpu/codegen/tree_reduction_source.h) and the cooperative group
// plans on work groups (batch_norm, layer_norm and their gradients) against the CPU backend.
// A GPU folds long groups so; a device whose work items are host cores (PoCL) does not, so
// this test turns them on (TENSORD_GPU_TREE_REDUCTIONS=on, set before the device opens) to
// run them on every device.
#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/launch.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

const bool kTreesOn = [] { return setenv("TENSORD_GPU_TREE_REDUCTIONS", "on", 1) == 0; }();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Long groups (256 elements and more) are folded by a work group each: sums, means and
// extrema of rows, of columns (strided) and of everything, with NaNs winning the extrema and
// ints and bools summed exactly.
TEST(DeviceReductions, LongGroupsFoldInWorkGroups) {
  TENSORD_REQUIRE_DEVICE(device);
  ASSERT_TRUE(kTreesOn);
  using Ints = std::vector<int64_t>;
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32, DType::kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor rows = Random(dtype, {3, 5000}, 50, -4, 4);
    const Tensor columns = Random(dtype, {1500, 2}, 51, -4, 4);
    const Tensor flat = Random(dtype, {70001}, 52, -4, 4);
    const Tensor shorter = Random(dtype, {7, 300}, 53, -4, 4);
    for (const std::string op : {"sum", "mean", "amax", "amin"}) {
      if (op == "mean" && !IsFloat(dtype)) continue;
      if (dtype == DType::kBool && op != "sum") continue;
      EXPECT_TRUE(SameOnDevice(device, op, {rows}, {{"dim", Ints{1}}}, 16)) << op;
      EXPECT_TRUE(SameOnDevice(device, op, {columns}, {{"dim", Ints{0}}}, 16)) << op;
      EXPECT_TRUE(SameOnDevice(device, op, {flat}, {}, 16)) << op;
      EXPECT_TRUE(SameOnDevice(device, op, {rows}, {{"dim", Ints{0, 1}}}, 16)) << op;
      // Rows of 300: work groups of 64.
      EXPECT_TRUE(SameOnDevice(device, op, {shorter}, {{"dim", Ints{1}}}, 16)) << op;
    }
  }
  std::vector<double> v(3000, 1.0);
  v[2999] = kNan;
  v[7] = kInf;
  const Tensor with_nan = Values(DType::kF32, {3000}, v);
  for (const std::string op : {"sum", "amax", "amin", "max", "min"}) {
    EXPECT_TRUE(SameOnDevice(device, op, {with_nan}, {})) << op;
  }
}

// Fewer than 256 long groups are cut into slices, folded into partials by a work group each
// and then per group: a full reduction of a million elements, three rows and three strided
// columns of 300,000, in every dtype the sums and extrema take; NaNs and infinities in a
// middle slice and in the last one (which also takes the elements the others leave over).
TEST(DeviceReductions, FewLongGroupsFoldInSlices) {
  TENSORD_REQUIRE_DEVICE(device);
  ASSERT_TRUE(kTreesOn);
  using Ints = std::vector<int64_t>;
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor flat = Random(dtype, {(1 << 20) + 37}, 60, -4, 4);
    const Tensor rows = Random(dtype, {3, 300001}, 61, -4, 4);
    const Tensor columns = Random(dtype, {300001, 3}, 62, -4, 4);
    for (const std::string op : {"sum", "mean", "amax", "amin"}) {
      if (op == "mean" && !IsFloat(dtype)) continue;
      if (dtype == DType::kBool && op != "sum") continue;
      EXPECT_TRUE(SameOnDevice(device, op, {flat}, {}, 16)) << op;
      EXPECT_TRUE(SameOnDevice(device, op, {rows}, {{"dim", Ints{1}}}, 16)) << op;
      EXPECT_TRUE(SameOnDevice(device, op, {columns}, {{"dim", Ints{0}}}, 16)) << op;
    }
    if (dtype != DType::kBool) {  // extrema whose every slice lies above or below zero
      EXPECT_TRUE(SameOnDevice(device, "amin", {Random(dtype, {1 << 20}, 64, 1, 5)}, {}));
      EXPECT_TRUE(SameOnDevice(device, "amax", {Random(dtype, {1 << 20}, 65, -5, -1)}, {}));
    }
  }
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (const int64_t at : {int64_t{250001}, int64_t{499999}}) {
      SCOPED_TRACE(at);
      std::vector<double> v = Random(dtype, {500000}, 63, -4, 4).ToDoubles();
      v[at] = kNan;
      v[10] = kInf;
      v[400000] = -kInf;
      const Tensor with_nan = Values(dtype, {500000}, v);
      for (const std::string op : {"sum", "mean", "amax", "amin", "max", "min"}) {
        EXPECT_TRUE(SameOnDevice(device, op, {with_nan}, {})) << op;
      }
      v[at] = 1.0;
      const Tensor with_inf = Values(dtype, {2, 250000}, v);
      for (const std::string op : {"sum", "amax", "amin"}) {
        EXPECT_TRUE(SameOnDevice(device, op, {with_inf}, {{"dim", Ints{1}}})) << op;
      }
    }
  }
}

// batch_norm's channels and layer_norm's rows and columns of 1024 elements and more run on a
// work group each (GroupPlan::cooperative): forward in training and evaluation, gradients, the
// statistics summed across the group's work items.
TEST(DeviceReductions, LongNormGroupsRunOnWorkGroups) {
  TENSORD_REQUIRE_DEVICE(device);
  ASSERT_TRUE(kTreesOn);
  using Ints = std::vector<int64_t>;
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(DTypeName(dtype));
    const AttrMap train = {{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}};
    const AttrMap eval = {{"training", false}, {"eps", 1e-5}};
    const Tensor w = Random(dtype, {3}, 2, 0.5, 1.5), b = Random(dtype, {3}, 3, -1, 1);
    const Tensor mean = Random(dtype, {3}, 4, -0.5, 0.5), var = Random(dtype, {3}, 5, 0.5, 2);
    const Tensor none = Random(dtype, {0}, 6);
    // 2,048 elements per channel: [8, 3, 16, 16], and [2048, 3] walking a strided column.
    for (const Shape& shape : {Shape{8, 3, 16, 16}, Shape{2048, 3}}) {
      const Tensor x = Random(dtype, shape, 7, -2, 3);
      EXPECT_TRUE(SameOnDevice(device, "batch_norm", {x, none, none, w, b}, train, 16));
      EXPECT_TRUE(SameOnDevice(device, "batch_norm", {x, mean, var, w, b}, eval, 16));
      if (dtype == DType::kF64) {
        EXPECT_TRUE(SameGradientsOnDevice(device, "batch_norm", {x, none, none, w, b}, train, 16));
        EXPECT_TRUE(SameGradientsOnDevice(device, "batch_norm", {x, mean, var, w, b}, eval, 16));
      }
    }
    // Rows of 3,000 (the forward and the input's gradient), and columns of 2,048 rows (the
    // weight's and bias's gradients).
    const Tensor rows = Random(dtype, {3, 3000}, 8, -2, 3);
    const Tensor rw = Random(dtype, {3000}, 9, 0.5, 1.5), rb = Random(dtype, {3000}, 10, -1, 1);
    const Tensor cols = Random(dtype, {2048, 4}, 11, -2, 3);
    const Tensor cw = Random(dtype, {4}, 12, 0.5, 1.5), cb = Random(dtype, {4}, 13, -1, 1);
    const AttrMap by_row = {{"normalized_shape", Ints{3000}}, {"eps", 1e-5}};
    const AttrMap by_col = {{"normalized_shape", Ints{4}}, {"eps", 1e-5}};
    EXPECT_TRUE(SameOnDevice(device, "layer_norm", {rows, rw, rb}, by_row, 16));
    if (dtype == DType::kF64) {
      EXPECT_TRUE(SameGradientsOnDevice(device, "layer_norm", {rows, rw, rb}, by_row, 16));
      EXPECT_TRUE(SameGradientsOnDevice(device, "layer_norm", {cols, cw, cb}, by_col, 16));
    }
  }
}

// The cooperative ops along a long row (GroupPlan::cooperative) on work groups (rows of 256
// elements and more, on groups of 64 to 256 items): softmax,
// log_softmax and logsumexp (the row's maximum and sum meeting across the items, a NaN or an
// infinity in a row as on the CPU), var and std, cross_entropy over 3,000 classes, and their
// gradients.
TEST(DeviceReductions, LongRowsOfCooperativeOpsRunOnWorkGroups) {
  TENSORD_REQUIRE_DEVICE(device);
  ASSERT_TRUE(kTreesOn);
  using Ints = std::vector<int64_t>;
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor random = Random(dtype, {4, 3000}, 20, -6, 6);
    std::vector<double> v = random.ToDoubles();
    v[3000 + 1234] = kNan;      // row 1 holds a NaN
    v[2 * 3000 + 2999] = kInf;  // row 2 an infinity
    const Tensor rows = Values(dtype, {4, 3000}, v);
    for (const std::string op : {"softmax", "log_softmax"}) {
      EXPECT_TRUE(SameOnDevice(device, op, {rows}, {{"dim", int64_t{1}}}, 16)) << op;
      EXPECT_TRUE(SameOnDevice(device, op, {random}, {{"dim", int64_t{1}}}, 16)) << op;
    }
    // Rows of 300 and 600: work groups of 64 and 128.
    for (int64_t n : {300, 600}) {
      const Tensor shorter = Random(dtype, {5, n}, 21, -6, 6);
      EXPECT_TRUE(SameOnDevice(device, "softmax", {shorter}, {{"dim", int64_t{1}}}, 16)) << n;
      EXPECT_TRUE(SameOnDevice(device, "var", {shorter}, {{"dim", Ints{1}}}, 16)) << n;
    }
    EXPECT_TRUE(SameOnDevice(device, "logsumexp", {rows}, {{"dim", Ints{1}}}, 16));
    EXPECT_TRUE(SameOnDevice(device, "var", {random}, {{"dim", Ints{1}}}, 16));
    EXPECT_TRUE(SameOnDevice(device, "std", {random}, {{"dim", Ints{1}}}, 16));
    const Tensor target = Values(DType::kI64, {4}, {5, 2999, 0, 1700});
    EXPECT_TRUE(SameOnDevice(device, "cross_entropy", {random, target}, {}, 16));
    if (dtype == DType::kF64) {
      for (const std::string op : {"softmax", "log_softmax"}) {
        EXPECT_TRUE(SameGradientsOnDevice(device, op, {random}, {{"dim", int64_t{1}}}, 16)) << op;
      }
      EXPECT_TRUE(SameGradientsOnDevice(device, "logsumexp", {random}, {{"dim", Ints{1}}}, 16));
      EXPECT_TRUE(SameGradientsOnDevice(device, "var", {random}, {{"dim", Ints{1}}}, 16));
      EXPECT_TRUE(SameGradientsOnDevice(device, "amax", {random}, {{"dim", Ints{1}}}, 16));
      EXPECT_TRUE(SameGradientsOnDevice(device, "cross_entropy", {random, target}, {}, 16));
    }
  }
}

// The other ops whose long groups share a work group: norms of every order (NaN winning the
// infinite ones), all and any, the class rows of cross_entropy and nll_loss (weights, an
// ignored target, label smoothing) and the batch's total, prelu's slope gradient per channel,
// against the CPU, with the gradients in f64.
TEST(DeviceReductions, LongGroupsOfNormsLossesAndPreluRunOnWorkGroups) {
  TENSORD_REQUIRE_DEVICE(device);
  ASSERT_TRUE(kTreesOn);
  using Ints = std::vector<int64_t>;
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor random = Random(dtype, {4, 3000}, 70, -6, 6);
    std::vector<double> v = random.ToDoubles();
    v[3000 + 1234] = kNan;
    v[2 * 3000 + 17] = 0.0;
    const Tensor rows = Values(dtype, {4, 3000}, v);
    const Tensor flat = Random(dtype, {70001}, 71, -2, 2);
    for (double p : {0.0, 1.0, 2.0, 3.0, kInf, -kInf}) {
      SCOPED_TRACE(p);
      EXPECT_TRUE(SameOnDevice(device, "norm", {rows}, {{"p", p}, {"dim", Ints{1}}}, 16));
      EXPECT_TRUE(SameOnDevice(device, "norm", {flat}, {{"p", p}}, 16));
      if (dtype == DType::kF64) {
        EXPECT_TRUE(
            SameGradientsOnDevice(device, "norm", {random}, {{"p", p}, {"dim", Ints{1}}}, 16));
      }
    }
    std::vector<double> ones(4 * 3000, 1.0);
    ones[2999] = 0.0;  // row 0 holds a zero, row 1 a NaN (not zero), rows 2 and 3 none
    ones[3000 + 5] = kNan;
    const Tensor mostly_set = Values(dtype, {4, 3000}, ones);
    std::vector<double> zeros(4 * 3000, 0.0);
    zeros[2 * 3000 + 2998] = -2.0;  // row 2 holds one set element
    const Tensor mostly_zero = Values(dtype, {4, 3000}, zeros);
    for (const std::string op : {"all", "any"}) {
      for (const Tensor& x : {mostly_set, mostly_zero}) {
        EXPECT_TRUE(SameOnDevice(device, op, {x}, {{"dim", Ints{1}}})) << op;
        EXPECT_TRUE(SameOnDevice(device, op, {x}, {})) << op;
      }
    }
  }
  const Tensor weight = Random(DType::kF64, {3000}, 72, 0.1, 2);
  const Tensor target = Values(DType::kI64, {4}, {5, 2999, -100, 1700});
  for (const std::string reduction : {"mean", "sum", "none"}) {
    for (double ls : {0.0, 0.1}) {
      SCOPED_TRACE(absl::StrCat(reduction, " ls=", ls));
      const AttrMap attrs = {{"reduction", reduction}, {"label_smoothing", ls}};
      const Tensor x = Random(DType::kF64, {4, 3000}, 73, -3, 3);
      EXPECT_TRUE(SameOnDevice(device, "cross_entropy", {x, target, weight}, attrs, 16));
      EXPECT_TRUE(SameGradientsOnDevice(device, "cross_entropy", {x, target, weight}, attrs, 16));
    }
  }
  // A batch of 600 samples: the losses' total on a work group.
  const Tensor batch_target = Random(DType::kI64, {600}, 74, 0, 5);
  EXPECT_TRUE(SameOnDevice(device, "cross_entropy",
                           {Random(DType::kF64, {600, 5}, 75, -3, 3), batch_target}, {}, 16));
  // prelu's slope gradient: each of 3 channels sums 8,192 elements.
  const Tensor x = Random(DType::kF64, {8, 3, 32, 32}, 76, -3, 3);
  EXPECT_TRUE(SameGradientsOnDevice(device, "prelu", {x, Values(DType::kF64, {3}, {0.1, 0.2, 0.3})},
                                    {}, 16));
  EXPECT_TRUE(
      SameGradientsOnDevice(device, "prelu", {x, Values(DType::kF64, {1}, {0.25})}, {}, 16));
}

// argmax, argmin, and max and min along a dim (values and indices) over long rows: the items'
// extrema meet in local memory, the first index winning among equals. Rows of small integers
// (many ties), with a NaN (the first NaN wins) and infinities; the gradient through max's
// indices.
TEST(DeviceReductions, LongRowsOfExtremaWithIndicesRunOnWorkGroups) {
  TENSORD_REQUIRE_DEVICE(device);
  ASSERT_TRUE(kTreesOn);
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32, DType::kI64}) {
    SCOPED_TRACE(DTypeName(dtype));
    std::vector<double> v = Random(DType::kI64, {5, 3000}, 80, -9, 9).ToDoubles();
    v[4 * 3000 + 2999] = 40;  // row 4's largest is its last element
    v[4 * 3000] = -40;        // and its smallest its first
    if (IsFloat(dtype)) {
      v[3000 + 2000] = kNan;  // row 1: two NaNs, the first at 1,000
      v[3000 + 1000] = kNan;
      v[2 * 3000 + 77] = kInf;  // row 2: infinities
      v[2 * 3000 + 2900] = -kInf;
    }
    const Tensor rows = Values(dtype, {5, 3000}, v);
    const Tensor columns = Run1("permute", {rows}, {{"dims", std::vector<int64_t>{1, 0}}});
    for (const std::string op : {"argmax", "argmin", "max", "min"}) {
      EXPECT_TRUE(SameOnDevice(device, op, {rows}, {{"dim", int64_t{1}}})) << op;
      EXPECT_TRUE(SameOnDevice(device, op, {columns}, {{"dim", int64_t{0}}})) << op;
      EXPECT_TRUE(SameOnDevice(device, op, {rows}, {})) << op;
    }
  }
  const Tensor x = Random(DType::kF64, {4, 3000}, 81, -6, 6);
  for (const std::string op : {"max", "min"}) {
    EXPECT_TRUE(SameGradientsOnDevice(device, op, {x}, {{"dim", int64_t{1}}})) << op;
  }
}

// A device whose kernels take smaller work groups than the device does (their registers or
// local memory cap them: CL_KERNEL_WORK_GROUP_SIZE, cudaFuncAttributes): capped at 64 items,
// trees of 256 fall back to one work item a group, cooperative plans of 128 and 256 too, those
// of 64 still run on work groups; every result as the CPU's. A launch past a kernel's limit is
// an internal error, so a family that did not fall back fails here.
TEST(DeviceReductions, KernelsCappedBelowTheDevicesGroupsFallBack) {
  TENSORD_REQUIRE_DEVICE(device);
  ASSERT_TRUE(kTreesOn);
  gpu::CapKernelGroups(64);
  struct Uncap {
    ~Uncap() { gpu::CapKernelGroups(0); }
  } uncap;
  using Ints = std::vector<int64_t>;
  const Tensor flat = Random(DType::kF32, {70001}, 90, -4, 4);
  const Tensor rows = Random(DType::kF64, {4, 3000}, 91, -4, 4);
  const Tensor shorter = Random(DType::kF64, {5, 300}, 92, -4, 4);
  for (const std::string op : {"sum", "mean", "amax", "amin"}) {
    EXPECT_TRUE(SameOnDevice(device, op, {flat}, {}, 16)) << op;
    EXPECT_TRUE(SameOnDevice(device, op, {rows}, {{"dim", Ints{1}}}, 16)) << op;
    EXPECT_TRUE(SameOnDevice(device, op, {shorter}, {{"dim", Ints{1}}}, 16)) << op;
  }
  for (const Tensor& x : {rows, shorter}) {
    for (const std::string op : {"softmax", "argmax"}) {
      EXPECT_TRUE(SameOnDevice(device, op, {x}, {{"dim", int64_t{1}}}, 16)) << op;
    }
    EXPECT_TRUE(SameOnDevice(device, "norm", {x}, {{"p", 2.0}, {"dim", Ints{1}}}, 16));
    EXPECT_TRUE(SameGradientsOnDevice(device, "var", {x}, {{"dim", Ints{1}}}, 16));
  }
  const Tensor images = Random(DType::kF64, {8, 3, 16, 16}, 93, -2, 3);
  const Tensor w = Random(DType::kF64, {3}, 94, 0.5, 1.5), b = Random(DType::kF64, {3}, 95, -1, 1);
  const Tensor none = Random(DType::kF64, {0}, 96);
  EXPECT_TRUE(SameGradientsOnDevice(device, "batch_norm", {images, none, none, w, b},
                                    {{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}}, 16));
}

}  // namespace
}  // namespace tensord::testing
