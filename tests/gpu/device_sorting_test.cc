// sort, argsort and topk on the accelerator against the CPU backend: values with ties (equal
// values keep their index order, ascending and descending), NaN (above every number), 0-d and
// empty tensors, every dim, every dtype; gradients of the sorted values in f64.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

// Small integers (many ties), with a NaN and infinities for floats.
Tensor TiesAndNan(DType dtype, const Shape& shape, uint32_t seed) {
  Tensor r = Random(DType::kI64, shape, seed, -3, 4);
  std::vector<double> v = r.ToDoubles();
  if (IsFloat(dtype) && v.size() > 4) {
    v[1] = NAN;
    v[3] = INFINITY;
    v[v.size() - 1] = NAN;
    v[v.size() - 2] = -INFINITY;
  }
  return Values(dtype, shape, v);
}

TEST(DeviceSorting, SortsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (const ShapedCase& c : SortOpCases()) {
    for (DType dtype :
         {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBF16, DType::kF16}) {
      const std::string what =
          absl::StrCat(c.op, " ", DTypeName(dtype), " case ", &c - &SortOpCases()[0]);
      EXPECT_TRUE(SameOnDevice(device, c.op, {TiesAndNan(dtype, c.inputs[0], 1)}, c.attrs)) << what;
      EXPECT_TRUE(SameOnDevice(device, c.op, {Random(dtype, c.inputs[0], 2, -2, 2)}, c.attrs))
          << what;
    }
    if (c.op != "argsort") {
      EXPECT_TRUE(SameGradientsOnDevice(device, c.op, {Random(DType::kF64, c.inputs[0], 3, -2, 2)},
                                        c.attrs))
          << c.op << " case " << &c - &SortOpCases()[0];
    }
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

// Lines longer than the rank sort takes are merge sorted: the same order (ties by index,
// NaN above every number), along the last dim and a middle one, both directions, topk's first
// k, with lengths that are no power of two.
TEST(DeviceSorting, LongLinesAreMergeSorted) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  struct Long {
    Shape shape;
    int64_t dim;
  };
  for (const Long& l : {Long{{2, 1000}, 1}, Long{{3, 257, 2}, 1}, Long{{4099}, 0}}) {
    for (DType dtype : {DType::kF32, DType::kI64, DType::kBF16}) {
      const std::string what = absl::StrCat(ShapeToString(l.shape), " ", DTypeName(dtype));
      for (const Tensor& x :
           {TiesAndNan(dtype, l.shape, 5), Random(dtype, l.shape, 6, -100, 100)}) {
        for (bool descending : {false, true}) {
          const AttrMap attrs = {{"dim", l.dim}, {"descending", descending}};
          EXPECT_TRUE(SameOnDevice(device, "sort", {x}, attrs)) << what;
          EXPECT_TRUE(SameOnDevice(device, "argsort", {x}, attrs)) << what;
          EXPECT_TRUE(SameOnDevice(device, "topk", {x},
                                   {{"k", int64_t{300}}, {"dim", l.dim}, {"largest", descending}}))
              << what;
        }
      }
    }
  }
  EXPECT_TRUE(SameGradientsOnDevice(device, "sort", {Random(DType::kF64, {2, 700}, 7)},
                                    {{"dim", int64_t{1}}}));
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

}  // namespace
}  // namespace tensord::testing
