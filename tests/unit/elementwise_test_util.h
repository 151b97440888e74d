// Reference helpers for the elementwise and activation op tests: inputs, an independent
// broadcasting walk for expected values, and per-dtype tolerances.
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {

// Random values in [lo, hi); `integral` floors float values too (to provoke ties).
inline Tensor Gen(DType dtype, Shape shape, uint32_t seed, double lo, double hi,
                  bool integral = false) {
  Tensor t = Random(integral && IsFloat(dtype) ? DType::kF64 : dtype, shape, seed, lo, hi);
  if (!integral || !IsFloat(dtype)) return t;
  std::vector<double> v = t.ToDoubles();
  for (double& x : v) x = std::floor(x);
  return Values(dtype, std::move(shape), v);
}

// NumPy broadcast of several shapes, written out independently of the server's.
inline Shape BroadcastOf(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      if (s[i] != 1) o = s[i];
    }
  }
  return out;
}

// Expected values of an elementwise op over broadcast operands: f gets one value per operand.
inline std::vector<double> BroadcastRef(
    const std::vector<Tensor>& in, const Shape& out,
    const std::function<double(const std::vector<double>&)>& f) {
  std::vector<std::vector<double>> values;
  for (const Tensor& t : in) values.push_back(t.ToDoubles());
  const int64_t n = NumElements(out);
  std::vector<double> expected;
  std::vector<double> args(in.size());
  for (int64_t flat = 0; flat < n; ++flat) {
    // Unravel the output index, then read each operand at the index clipped to its shape.
    Shape index(out.size());
    int64_t rest = flat;
    for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
      index[d] = rest % out[d];
      rest /= out[d];
    }
    for (size_t k = 0; k < in.size(); ++k) {
      const Shape& s = in[k].shape();
      int64_t off = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        const int64_t idx = s[i] == 1 ? 0 : index[out.size() - s.size() + i];
        off = off * s[i] + idx;
      }
      args[k] = values[k][off];
    }
    expected.push_back(f(args));
  }
  return expected;
}

struct Tolerance {
  double rtol, atol;
};
inline Tolerance TolFor(DType d) {
  if (d == DType::kF32) return {2e-5, 2e-6};
  if (d == DType::kF64) return {1e-12, 1e-14};
  return {0, 0};
}

// Runs `op` and checks dtype, shape and values against `expected`.
inline ::testing::AssertionResult Matches(const std::string& op, const std::vector<Tensor>& in,
                                          const AttrMap& attrs, DType dtype, const Shape& shape,
                                          const std::vector<double>& expected) {
  auto out = RunOp(op, in, attrs);
  if (!out.ok()) return ::testing::AssertionFailure() << op << ": " << out.status();
  const Tensor& y = (*out)[0];
  if (y.dtype() != dtype) {
    return ::testing::AssertionFailure()
           << op << ": dtype " << DTypeName(y.dtype()) << ", expected " << DTypeName(dtype);
  }
  if (y.shape() != shape) {
    return ::testing::AssertionFailure()
           << op << ": shape " << ShapeToString(y.shape()) << ", expected " << ShapeToString(shape);
  }
  const Tolerance tol = TolFor(dtype);
  return AllClose(y, expected, tol.rtol, tol.atol);
}

inline Reason ReasonOf(const absl::StatusOr<std::vector<Tensor>>& r) {
  return r.ok() ? Reason::kUnspecified : GetReason(r.status());
}

}  // namespace tensord::testing
