// Shared test helpers: a dispatcher over the built-in registry and the CPU backend, random
// tensors, comparisons, and the finite-difference gradient check.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "server/dispatch/dispatcher.h"

namespace tensord::testing {

const Dispatcher& TestDispatcher();

// Runs an op outside autodiff.
absl::StatusOr<std::vector<Tensor>> RunOp(const std::string& op, std::vector<Tensor> inputs,
                                          const AttrMap& attrs = {});
// Runs a single-output op and fails the test on error (returns an undefined tensor then).
Tensor Run1(const std::string& op, std::vector<Tensor> inputs, const AttrMap& attrs = {});

// Uniform values in [lo, hi) (rounded for integer dtypes; bool: random 0/1).
Tensor Random(DType dtype, Shape shape, uint32_t seed, double lo = -1.0, double hi = 1.0);
Tensor Values(DType dtype, Shape shape, const std::vector<double>& values);
// A wrapped scalar operand, as clients send Python numbers: a float, and an int.
Tensor ScalarOperand(double v);
Tensor IntOperand(int64_t v);
// `t` converted to `dtype` by to_dtype (fails the test on error).
Tensor CastTo(const Tensor& t, DType dtype);

// Elementwise |a - b| <= atol + rtol * |b|, with NaN == NaN and inf == inf.
::testing::AssertionResult AllClose(const Tensor& actual, const std::vector<double>& expected,
                                    double rtol = 1e-5, double atol = 1e-6);
::testing::AssertionResult AllClose(const Tensor& actual, const Tensor& expected,
                                    double rtol = 1e-5, double atol = 1e-6);

struct GradCheckOptions {
  double eps = 1e-6;
  double rtol = 1e-4;
  double atol = 1e-6;
  std::vector<int> wrt;  // input indices to check; empty = every float input
  Checkpointing checkpointing = Checkpointing::kNone;
};

// Compares the autodiff gradient of sum(W * op(inputs)) (W random, one per float output) with
// central differences, for every element of every checked input. Inputs should be f64.
::testing::AssertionResult GradCheck(const std::string& op, const std::vector<Tensor>& inputs,
                                     const AttrMap& attrs = {},
                                     const GradCheckOptions& options = {});

}  // namespace tensord::testing
