// Reference helpers for the reduction tests: an independent grouping of input values by output
// element, the dim cases every reduction is run over, and the comparison against a reference.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "server/core/status.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {

// Input values grouped by output element, in input order, plus the output shape.
struct Groups {
  Shape shape;
  std::vector<std::vector<double>> values;
};

// Reference grouping, written independently of the kernels: unravel every flat index, drop
// (or zero, for keepdim) the reduced coordinates, ravel into the output.
inline Groups GroupBy(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  const Shape& in = x.shape();
  const int64_t rank = in.size();
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  }
  for (int64_t& d : dims) d = d < 0 ? d + rank : d;
  auto reduced = [&](int64_t d) { return std::find(dims.begin(), dims.end(), d) != dims.end(); };
  Groups g;
  Shape full;  // output shape with reduced dims as 1
  for (int64_t d = 0; d < rank; ++d) {
    full.push_back(reduced(d) ? 1 : in[d]);
    if (!reduced(d) || keepdim) g.shape.push_back(reduced(d) ? 1 : in[d]);
  }
  g.values.resize(NumElements(full));
  std::vector<double> v = x.ToDoubles();
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rest = i, out = 0, stride = 1;
    std::vector<int64_t> coord(rank);
    for (int64_t d = rank - 1; d >= 0; --d) {
      coord[d] = rest % in[d];
      rest /= in[d];
    }
    for (int64_t d = rank - 1; d >= 0; --d) {
      out += (reduced(d) ? 0 : coord[d]) * stride;
      stride *= full[d];
    }
    g.values[out].push_back(v[i]);
  }
  return g;
}

using RefFn = std::function<double(const std::vector<double>&)>;

// Runs `op` and compares shape, dtype and values with the reference over `dims`.
inline void ExpectReduction(const std::string& op, const Tensor& x, const AttrMap& attrs,
                            std::vector<int64_t> dims, bool keepdim, const RefFn& ref,
                            DType out_dtype, double rtol = 1e-5) {
  SCOPED_TRACE(op + " of " + ShapeToString(x.shape()) + " " + std::string(DTypeName(x.dtype())) +
               " dims " + ShapeToString(dims) + (keepdim ? " keepdim" : ""));
  Tensor out = Run1(op, {x}, attrs);
  ASSERT_TRUE(out.defined());
  Groups g = GroupBy(x, dims, keepdim);
  EXPECT_EQ(out.shape(), g.shape);
  EXPECT_EQ(out.dtype(), out_dtype);
  std::vector<double> expected;
  for (const auto& v : g.values) expected.push_back(ref(v));
  if (IsInt(out_dtype) || IsBool(out_dtype)) {
    // Integer outputs of float references (e.g. sum of i32) must match exactly.
    EXPECT_TRUE(AllClose(out, expected, 0, 0));
  } else {
    EXPECT_TRUE(AllClose(out, expected, rtol, 1e-6));
  }
}

struct DimCase {
  Shape shape;
  std::vector<int64_t> dims;  // empty: attribute absent (all dims)
};

// Shapes and dim lists covering all dims, last dim, dim 0, middle runs, non-adjacent lists,
// negative dims, size-1 dims, 0-d inputs and empty tensors.
inline std::vector<DimCase> ListCases() {
  return {{{2, 3, 4}, {}},
          {{2, 3, 4}, {0}},
          {{2, 3, 4}, {-1}},
          {{2, 3, 4}, {1}},
          {{2, 3, 4}, {0, 2}},
          {{2, 3, 4}, {-1, 0}},
          {{2, 3, 4}, {1, 2}},
          {{2, 3, 4, 5}, {1, 3}},
          {{5}, {}},
          {{5}, {0}},
          {{}, {}},
          {{}, {-1}},
          {{1, 4, 1, 3}, {0, 2}},
          {{37, 19}, {1}},
          {{37, 19}, {0}},
          {{3, 0, 2}, {1}},
          {{3, 0, 2}, {0}}};
}

inline AttrMap DimAttrs(const std::vector<int64_t>& dims, bool keepdim) {
  AttrMap a = {{"keepdim", keepdim}};
  if (!dims.empty()) a["dim"] = dims;
  return a;
}

}  // namespace tensord::testing
