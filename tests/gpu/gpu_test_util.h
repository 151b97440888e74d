// Helpers of the GPU backend tests: a dispatcher over every backend of the build, the device
// under test, moves, and comparisons of a call on the device with the same call on the CPU.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/dispatch/dispatcher.h"

namespace tensord::testing {

// Every backend this build has, over the built-in op table.
const Dispatcher& DeviceDispatcher();
// The accelerator device the tests run on: $TENSORD_TEST_GPU_DEVICE, else the first
// non-CPU device; "" when there is none or the machine lacks the one named.
std::string DeviceUnderTest();
// Skips the test on a machine without an accelerator, unless $TENSORD_REQUIRE_GPU is set
// (CI sets it: there the device must exist, and its absence fails).
#define TENSORD_REQUIRE_DEVICE(device)                                                    \
  const std::string device = ::tensord::testing::DeviceUnderTest();                       \
  if (device.empty()) {                                                                   \
    if (std::getenv("TENSORD_REQUIRE_GPU") != nullptr) FAIL() << "no accelerator device"; \
    GTEST_SKIP() << "no accelerator device on this machine";                              \
  }

Tensor MoveTo(const Tensor& t, const std::string& device);
// Each of `inputs` moved to `device`, but number operands (0-d host tensors), which join a
// device call as they are.
std::vector<Tensor> MoveAllTo(const std::vector<Tensor>& inputs, const std::string& device);
// The same dtype, shape and bytes (host tensors).
bool SameBytes(const Tensor& a, const Tensor& b);

// Tolerances by dtype: exact for integers and bool, a few ulps of the dtype for floats.
struct Tolerance {
  double rtol;
  double atol;
};
Tolerance ToleranceFor(DType dtype);

// Calls the device's backend refused with UNSUPPORTED_ON_BACKEND that the CPU runs, as
// "op:dtype" of the first input: the tests compare them with the documented gaps.
std::set<std::string>& UnsupportedCalls();

// Runs `op` on the CPU and on `device` (inputs moved there) and compares: the same error
// reason, or outputs of the same dtype and shape with values within tolerance. A refusal by
// the device (UNSUPPORTED_ON_BACKEND) is recorded in UnsupportedCalls() instead. `loose` widens
// float tolerances (functions whose device library differs by more than a few ulps).
::testing::AssertionResult SameOnDevice(const std::string& device, const std::string& op,
                                        const std::vector<Tensor>& inputs,
                                        const AttrMap& attrs = {}, double loose = 1);

// Forward under autodiff and backward (seeded with the same random weights) on the CPU and on
// `device`; the gradients of every float input must agree within tolerance (a refusal by the
// device is recorded as in SameOnDevice).
::testing::AssertionResult SameGradientsOnDevice(const std::string& device, const std::string& op,
                                                 const std::vector<Tensor>& inputs,
                                                 const AttrMap& attrs = {}, double loose = 1);

// The group ops (reductions, statistics, norms, scans, softmax) and the attribute forms
// device_reduction_test runs; the coverage test counts them as tested.
const std::vector<std::pair<std::string, AttrMap>>& GroupOpCases();

// An op with its inputs' shapes and an attribute form.
struct ShapedCase {
  std::string op;
  std::vector<Shape> inputs;
  AttrMap attrs;
};
// Random values in [-2, 2] of `dtype` for each input shape of `c`, input i from seed + i.
std::vector<Tensor> RandomInputs(const ShapedCase& c, DType dtype, uint32_t seed);
// The layout ops (joins, splits, slices, flips, rolls, repeats, triangles, pads, diagonals)
// that device_layout_test runs, and the normalisations device_nn_test runs; the coverage test
// counts them as tested.
const std::vector<ShapedCase>& LayoutOpCases();
const std::vector<ShapedCase>& NnOpCases();
// sort, argsort and topk, that device_sorting_test runs on values with ties and NaN.
const std::vector<ShapedCase>& SortOpCases();

// The ops that index by tensors or select by the data (nonzero, masked_select), each with a
// builder of its inputs for a value dtype (valid indices, duplicates among those that write,
// zeros among those that select) and an attribute form, that
// device_indexing_test runs; the coverage test counts them as tested.
struct IndexingCase {
  std::string op;
  std::function<std::vector<Tensor>(DType)> inputs;
  AttrMap attrs;
};
const std::vector<IndexingCase>& IndexingOpCases();

}  // namespace tensord::testing
