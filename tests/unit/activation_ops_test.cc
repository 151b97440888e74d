// Activations: every op × dtype against a plain C++ reference (0-d, empty and larger shapes),
// softmax / log_softmax along every dim with large and infinite inputs, and error reasons.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/unit/elementwise_test_util.h"

namespace tensord {
namespace {
using namespace testing;

struct ActivationCase {
  std::string op;
  DTypeSet dtypes;
  std::function<double(double)> ref;
  AttrMap attrs = {};
};

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double GeluTanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
std::function<double(double)> Softplus(double beta, double threshold) {
  return [=](double x) { return x * beta > threshold ? x : std::log1p(std::exp(beta * x)) / beta; };
}

std::vector<ActivationCase> Cases() {
  return {
      {"relu", kFloatInt, [](double x) { return std::max(x, 0.0); }},
      {"sigmoid", kAll, Sigmoid},
      {"tanh", kAll, [](double x) { return std::tanh(x); }},
      {"gelu", kFloat, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"gelu", kFloat, GeluTanh, {{"approximate", std::string("tanh")}}},
      {"silu", kFloat, [](double x) { return x * Sigmoid(x); }},
      {"softplus", kFloat, Softplus(1, 20)},
      // Inputs reach past the threshold, so both branches are compared.
      {"softplus", kFloat, Softplus(2, 3), {{"beta", 2.0}, {"threshold", 3.0}}},
      {"leaky_relu", kFloat, [](double x) { return x > 0 ? x : 0.01 * x; }},
      {"leaky_relu",
       kFloat,
       [](double x) { return x > 0 ? x : 0.2 * x; },
       {{"negative_slope", 0.2}}},
      {"elu", kFloat, [](double x) { return x > 0 ? x : std::expm1(x); }},
      {"elu", kFloat, [](double x) { return x > 0 ? x : 1.5 * std::expm1(x); }, {{"alpha", 1.5}}},
  };
}

TEST(Activations, EveryOpAndDtypeMatchesReference) {
  const std::vector<Shape> shapes = {{2, 3}, {}, {0, 3}, {4, 5, 6}};
  uint32_t seed = 1;
  for (const ActivationCase& c : Cases()) {
    for (DType d : c.dtypes.ToVector()) {
      const bool float_function = c.op == "sigmoid" || c.op == "tanh";
      const DType out = float_function && !IsFloat(d) ? DType::kF32 : d;
      for (const Shape& s : shapes) {
        Tensor x = Random(d, s, ++seed, -4, 4);
        std::vector<double> expected;
        for (double v : x.ToDoubles()) expected.push_back(c.ref(v));
        EXPECT_TRUE(Matches(c.op, {x}, c.attrs, out, s, expected))
            << c.op << " " << DTypeName(d) << ShapeToString(s);
      }
    }
  }
}

TEST(Activations, EdgeValues) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (DType d : {DType::kF32, DType::kF64}) {
    const Tensor x = Values(d, {5}, {nan, inf, -inf, 0, -100});
    EXPECT_TRUE(AllClose(Run1("relu", {x}), {nan, inf, 0, 0, 0}));
    EXPECT_TRUE(AllClose(Run1("sigmoid", {x}), {nan, 1, 0, 0.5, Sigmoid(-100)}, 1e-5, 1e-30));
    EXPECT_TRUE(AllClose(Run1("tanh", {x}), {nan, 1, -1, 0, -1}));
    EXPECT_TRUE(AllClose(Run1("softplus", {Values(d, {2}, {-100, 100})}), {std::exp(-100.0), 100},
                         1e-5, 1e-30));
    EXPECT_TRUE(AllClose(Run1("elu", {Values(d, {2}, {-inf, 2})}), {-1, 2}));
  }
}

// softmax / log_softmax of x along dim, computed in double.
std::vector<double> SoftmaxRef(const Tensor& x, int64_t dim, bool log) {
  const Shape& s = x.shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  if (dim < 0) dim += std::max<int64_t>(rank, 1);
  int64_t outer = 1, size = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < dim ? outer : i == dim ? size : inner) *= s[i];
  std::vector<double> v = x.ToDoubles(), y(v.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t k) { return (o * size + k) * inner + j; };
      double m = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t k = 0; k < size; ++k) m = std::max(m, v[at(k)]);
      for (int64_t k = 0; k < size; ++k) sum += std::exp(v[at(k)] - m);
      for (int64_t k = 0; k < size; ++k) {
        y[at(k)] = log ? v[at(k)] - m - std::log(sum) : std::exp(v[at(k)] - m) / sum;
      }
    }
  }
  return y;
}

TEST(Softmax, EveryDimMatchesReference) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {{{2, 3, 4}, {0, 1, 2, -1, -3}},
                                                                     {{5}, {0, -1}},
                                                                     {{}, {0, -1}},
                                                                     {{0, 3}, {0, 1}},
                                                                     {{3, 1}, {0, 1}},
                                                                     {{7, 33}, {1, 0}}};
  uint32_t seed = 50;
  for (const char* op : {"softmax", "log_softmax"}) {
    for (DType d : {DType::kF32, DType::kF64}) {
      for (const auto& [shape, dims] : cases) {
        Tensor x = Random(d, shape, ++seed, -5, 5);
        for (int64_t dim : dims) {
          EXPECT_TRUE(Matches(op, {x}, {{"dim", dim}}, d, shape,
                              SoftmaxRef(x, dim, std::string(op) == "log_softmax")))
              << op << " " << DTypeName(d) << ShapeToString(shape) << " dim " << dim;
        }
      }
    }
  }
}

TEST(Softmax, StableForLargeAndInfiniteInputs) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType d : {DType::kF32, DType::kF64}) {
    const Tensor big = Values(d, {3}, {1000, 1001, 1002});
    EXPECT_TRUE(AllClose(Run1("softmax", {big}, {{"dim", int64_t{0}}}),
                         SoftmaxRef(Values(DType::kF64, {3}, {0, 1, 2}), 0, false)));
    EXPECT_TRUE(AllClose(Run1("log_softmax", {big}, {{"dim", int64_t{-1}}}),
                         SoftmaxRef(Values(DType::kF64, {3}, {0, 1, 2}), 0, true)));
    const Tensor masked = Values(d, {2, 2}, {-inf, 0, 3, -inf});
    EXPECT_TRUE(AllClose(Run1("softmax", {masked}, {{"dim", int64_t{1}}}), {0, 1, 1, 0}));
    EXPECT_TRUE(AllClose(Run1("log_softmax", {masked}, {{"dim", int64_t{1}}}), {-inf, 0, 0, -inf}));
  }
  // The dtype attribute computes in (and returns) that dtype, like torch's softmax(dtype=).
  Tensor x = Random(DType::kF32, {2, 3}, 7);
  Tensor y = Run1("softmax", {x}, {{"dim", int64_t{1}}, {"dtype", std::string("float64")}});
  EXPECT_EQ(y.dtype(), DType::kF64);
  EXPECT_TRUE(AllClose(y, SoftmaxRef(x, 1, false), 1e-7, 1e-9));
}

TEST(Activations, ErrorsCarryTheRightReason) {
  const Tensor f = Random(DType::kF32, {2, 3}, 1);
  const Tensor i = Values(DType::kI64, {2}, {1, 2});
  EXPECT_EQ(ReasonOf(RunOp("gelu", {f}, {{"approximate", std::string("foo")}})),
            Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("gelu", {i})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("silu", {Values(DType::kBool, {1}, {1})})), Reason::kDtypeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("leaky_relu", {f}, {{"negative_slope", std::string("x")}})),
            Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("softmax", {f})), Reason::kBadAttribute);
  auto out_of_range = RunOp("softmax", {f}, {{"dim", int64_t{2}}});
  EXPECT_EQ(ReasonOf(out_of_range), Reason::kBadAttribute);
  EXPECT_EQ(GetMetadata(out_of_range.status()).at("attribute"), "dim");
  EXPECT_EQ(ReasonOf(RunOp("log_softmax", {f}, {{"dim", int64_t{-3}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("softmax", {f}, {{"dim", int64_t{0}}, {"dtype", std::string("int32")}})),
            Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("softmax", {i}, {{"dim", int64_t{0}}})), Reason::kDtypeMismatch);
}

TEST(Activations, FusedBackwardOpsAreInternal) {
  const OpRegistry& r = OpRegistry::Builtin();
  for (const char* op : {"relu", "sigmoid", "tanh", "gelu", "silu", "softplus", "leaky_relu", "elu",
                         "softmax", "log_softmax"}) {
    auto def = r.Find(op);
    ASSERT_TRUE(def.ok()) << op;
    EXPECT_EQ((*def)->marking, Marking::kDifferentiable) << op;
    EXPECT_FALSE((*def)->compute_bound) << op;
    EXPECT_FALSE((*def)->internal) << op;
  }
  // Pointwise activations differentiate through a fused op clients cannot see.
  for (const char* op :
       {"relu", "sigmoid", "tanh", "gelu", "silu", "softplus", "leaky_relu", "elu"}) {
    auto backward = r.Find(std::string(op) + "_backward");
    ASSERT_TRUE(backward.ok()) << op;
    EXPECT_TRUE((*backward)->internal) << op;
  }
}

}  // namespace
}  // namespace tensord
