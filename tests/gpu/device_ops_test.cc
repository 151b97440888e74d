// Every op the accelerator backend lists, forward and gradient, against the CPU backend (the
// idea of ggml's test-backend-ops): random values, broadcasting, 0-d and empty tensors,
// number operands, inputs made non-contiguous by a transpose first, every dtype the op takes.
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "server/backends/backend.h"
#include "server/core/status.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

constexpr DType kDTypes[] = {DType::kF32,  DType::kF64,  DType::kI32, DType::kI64,
                             DType::kBool, DType::kBF16, DType::kF16};

const OpDef& Def(const std::string& op) { return **OpRegistry::Builtin().Find(op); }

// The ops the device's backend lists (ListOps' backends column).
std::vector<std::string> ListedOps(const std::string& device) {
  std::string kind;
  for (const DeviceInfo& d : DeviceDispatcher().Devices()) {
    if (d.name == device) kind = d.kind;
  }
  std::vector<std::string> out;
  for (const OpDef* d : OpRegistry::Builtin().All()) {
    const OpDef& def = *d;
    const std::string& name = def.name;
    if (def.composite || def.device_move) continue;
    for (const std::string& k : DeviceDispatcher().BackendsFor(def)) {
      if (k == kind) out.push_back(name);
    }
  }
  return out;
}

// Values where every elementwise function is defined for most inputs; the rest give NaN or
// inf on both devices alike.
Tensor Input(DType dtype, Shape shape, uint32_t seed) {
  return Random(dtype, std::move(shape), seed, IsFloat(dtype) ? -2.0 : -5.0,
                IsFloat(dtype) ? 2.0 : 6.0);
}

// Transposed on the CPU first, so the device sees the values of a non-contiguous view.
Tensor Transposed(DType dtype, uint32_t seed) {
  return Run1("transpose", {Input(dtype, {4, 3}, seed)},
              {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
}

// The elementwise test takes every listed op of these categories with 1 to 3 inputs.
bool InElementwiseTest(const OpDef& def) {
  return (def.category == "elementwise" || def.category == "activation") && def.min_inputs >= 1 &&
         def.min_inputs <= 3;
}

// The one-input cases of the shape test, and its other ops (the coverage test reads both).
const std::vector<std::pair<std::string, AttrMap>>& UnaryShapeCases() {
  static const auto* cases = new std::vector<std::pair<std::string, AttrMap>>{
      {"reshape", {{"shape", std::vector<int64_t>{4, 6}}}},
      {"flatten", {}},
      {"squeeze", {}},
      {"unsqueeze", {{"dim", int64_t{1}}}},
      {"detach", {}},
      {"permute", {{"dims", std::vector<int64_t>{2, 0, 1}}}},
      {"transpose", {{"dim0", int64_t{0}}, {"dim1", int64_t{2}}}},
      {"contiguous", {}},
      {"clone", {}},
      {"zeros_like", {}},
      {"ones_like", {}},
      {"full_like", {{"value", 3.0}}},
  };
  return *cases;
}
const std::vector<std::string> kCreationOps = {"zeros", "ones", "full"};
const std::vector<std::string> kReductionOps = {"sum", "mean", "prod", "all", "any"};
const std::vector<std::string> kOtherShapeOps = {"expand", "to_dtype", "assign"};
const std::vector<std::string> kProductOps = {"mm", "bmm", "matmul", "linear"};

TEST(DeviceOps, ElementwiseMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (const std::string& op : ListedOps(device)) {
    const OpDef& def = Def(op);
    if (!InElementwiseTest(def)) continue;
    const int n = def.min_inputs;
    for (DType dtype : kDTypes) {
      if (op == "where") {
        Tensor cond = Input(DType::kBool, {3, 1, 4}, 7);
        EXPECT_TRUE(SameOnDevice(device, op, {cond, Input(dtype, {2, 4}, 8), Input(dtype, {4}, 9)}))
            << DTypeName(dtype);
        continue;
      }
      std::vector<std::vector<Shape>> shape_sets = {std::vector<Shape>(n, Shape{3, 4}),
                                                    std::vector<Shape>(n, Shape{}),
                                                    std::vector<Shape>(n, Shape{0, 3})};
      if (n == 2) {
        shape_sets.push_back({{3, 1, 4}, {2, 4}});
        shape_sets.push_back({{5}, {}});
      }
      for (const auto& shapes : shape_sets) {
        std::vector<Tensor> in;
        for (int i = 0; i < n; ++i) in.push_back(Input(dtype, shapes[i], 11 + i));
        EXPECT_TRUE(SameOnDevice(device, op, in))
            << DTypeName(dtype) << " " << ShapeToString(shapes[0]);
      }
      std::vector<Tensor> strided;
      for (int i = 0; i < n; ++i) strided.push_back(Transposed(dtype, 21 + i));
      EXPECT_TRUE(SameOnDevice(device, op, strided)) << DTypeName(dtype) << " transposed";
      if (n == 2) {
        EXPECT_TRUE(SameOnDevice(device, op, {Input(dtype, {2, 3}, 31), ScalarOperand(1.5)}))
            << DTypeName(dtype) << " with a number";
      }
    }
    // Gradients in f64 (the CPU's are checked numerically in tests/autodiff).
    if (def.marking == Marking::kDifferentiable) {
      std::vector<Tensor> in;
      for (int i = 0; i < n; ++i) {
        in.push_back(op == "where" && i == 0
                         ? Input(DType::kBool, {2, 1}, 40)
                         : Input(DType::kF64, i == 1 ? Shape{3} : Shape{2, 3}, 41 + i));
      }
      EXPECT_TRUE(SameGradientsOnDevice(device, op, in)) << op;
    }
  }
  // The backend refuses nothing the CPU runs.
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

TEST(DeviceOps, ActivationAttributesMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  const std::vector<std::pair<std::string, AttrMap>> cases = {
      {"add", {{"alpha", 2.5}}},
      {"sub", {{"alpha", -0.5}}},
      {"div", {{"rounding_mode", std::string("floor")}}},
      {"div", {{"rounding_mode", std::string("trunc")}}},
      {"gelu", {{"approximate", std::string("tanh")}}},
      {"softplus", {{"beta", 2.0}, {"threshold", 1.0}}},
      {"leaky_relu", {{"negative_slope", 0.2}}},
      {"elu", {{"alpha", 0.7}}},
      {"celu", {{"alpha", 0.7}}},
      {"hardtanh", {{"min_val", -0.5}, {"max_val", 1.5}}},
      {"softshrink", {{"lambd", 0.3}}},
      {"hardshrink", {{"lambd", 1.2}}},
      {"threshold", {{"threshold", 0.1}, {"value", -2.0}}},
      {"clamp", {{"min", -0.5}}},
      {"clamp", {{"max", 0.25}}},
      {"clamp", {{"min", 0.5}, {"max", -0.5}}},
      {"round", {{"decimals", int64_t{1}}}},
      {"round", {{"decimals", int64_t{-1}}}},
  };
  for (const auto& [op, attrs] : cases) {
    const int n = Def(op).min_inputs;
    for (DType dtype : {DType::kF32, DType::kF64}) {
      std::vector<Tensor> in;
      for (int i = 0; i < n; ++i) in.push_back(Input(dtype, {3, 4}, 50 + i));
      EXPECT_TRUE(SameOnDevice(device, op, in, attrs)) << op;
      if (dtype == DType::kF64) EXPECT_TRUE(SameGradientsOnDevice(device, op, in, attrs)) << op;
    }
  }
  // A fractional bound gives an f32 output.
  EXPECT_TRUE(SameOnDevice(device, "clamp", {Input(DType::kI64, {3}, 60)}, {{"min", 0.5}}));
}

// The integer forms of the dividing ops, pow and clamp: the trap cases (lowest() / -1,
// lowest() % -1), signs of every combination, negative exponents, overflowing powers (they
// wrap), bounds past the dtype's range (saturated); and a zero anywhere in the divisor is the
// CPU's INVALID_REQUEST, checked on the device before anything is computed.
TEST(DeviceOps, IntegerDivisionPowAndClampMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (DType dtype : {DType::kI32, DType::kI64}) {
    const double lowest = dtype == DType::kI32 ? -2147483648.0 : -9223372036854775808.0;
    const Tensor a = Values(dtype, {10}, {7, -7, 7, -7, 0, lowest, lowest, 5, -1, 13});
    const Tensor b = Values(dtype, {10}, {2, 2, -2, -2, 3, -1, 7, -1, 1, -4});
    const std::string what(DTypeName(dtype));
    for (const AttrMap& attrs : std::vector<AttrMap>{{{"rounding_mode", std::string("trunc")}},
                                                     {{"rounding_mode", std::string("floor")}}}) {
      EXPECT_TRUE(SameOnDevice(device, "div", {a, b}, attrs)) << what;
    }
    EXPECT_TRUE(SameOnDevice(device, "fmod", {a, b})) << what;
    EXPECT_TRUE(SameOnDevice(device, "remainder", {a, b})) << what;
    EXPECT_TRUE(SameOnDevice(device, "remainder", {a, ScalarOperand(-3)})) << what;
    const Tensor base = Values(dtype, {8}, {2, -2, 1, -1, -1, 3, 0, 7});
    const Tensor exponent = Values(dtype, {8}, {10, 3, -5, -3, -4, 40, 0, -1});
    EXPECT_TRUE(SameOnDevice(device, "pow", {base, exponent})) << what;
    EXPECT_TRUE(SameOnDevice(device, "pow", {base, ScalarOperand(3)})) << what;
    for (const AttrMap& attrs : std::vector<AttrMap>{{{"min", -2.0}, {"max", 6.0}},
                                                     {{"min", 3.0}},
                                                     {{"max", -1.0}},
                                                     {{"min", 1e30}},
                                                     {{"min", 1e30}, {"max", 4.0}},
                                                     {{"min", -1e30}, {"max", 1e30}},
                                                     {{"min", 5.0}, {"max", 2.0}}}) {
      EXPECT_TRUE(SameOnDevice(device, "clamp", {a}, attrs)) << what;
    }
    // A zero divisor: the CPU's error, before anything runs.
    const Tensor with_zero = Values(dtype, {10}, {2, 2, -2, -2, 3, 0, 7, -1, 1, -4});
    for (const std::string& op : {"fmod", "remainder"}) {
      EXPECT_TRUE(SameOnDevice(device, op, {a, with_zero})) << op;
      CallEnv env;
      auto r = DeviceDispatcher().Call(op, {MoveTo(a, device), MoveTo(with_zero, device)}, {}, env);
      EXPECT_EQ(GetReason(r.status()), Reason::kInvalidRequest) << op;
    }
    EXPECT_TRUE(
        SameOnDevice(device, "div", {a, with_zero}, {{"rounding_mode", std::string("floor")}}));
    EXPECT_TRUE(SameOnDevice(device, "remainder", {a, ScalarOperand(0)}));
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

// The piecewise activations at their kinks, where each side of a comparison decides the value
// or the gradient (PyTorch's branch choices), and at NaN and the infinities.
TEST(DeviceOps, ActivationKinksMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  const std::vector<double> points = {-3,  3,    0,  6,   -1,   1,   0.5,      -0.5,
                                      0.1, -0.1, 20, -20, 1e-8, NAN, INFINITY, -INFINITY};
  const std::vector<std::pair<std::string, AttrMap>> cases = {
      {"relu6", {}},
      {"hardtanh", {}},
      {"selu", {}},
      {"celu", {}},
      {"hardsigmoid", {}},
      {"hardswish", {}},
      {"softshrink", {}},
      {"hardshrink", {}},
      {"mish", {}},
      {"logsigmoid", {}},
      {"threshold", {{"threshold", 0.5}, {"value", 7.0}}},
      {"hardtanh", {{"min_val", -3.0}, {"max_val", 3.0}}},
      {"softshrink", {{"lambd", 1.0}}},
  };
  for (const auto& [op, attrs] : cases) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      std::vector<double> at = points;
      // mish's gradient at +-inf is inf * 0 on the CPU (NaN): only where the library's f32
      // tanh(inf) is exactly 1, which OpenCL's precision rules do not promise.
      if (op == "mish") at.resize(at.size() - 2);
      const Tensor x = Values(dtype, {static_cast<int64_t>(at.size())}, at);
      EXPECT_TRUE(SameOnDevice(device, op, {x}, attrs)) << op << " " << DTypeName(dtype);
      EXPECT_TRUE(SameGradientsOnDevice(device, op, {x}, attrs)) << op << " " << DTypeName(dtype);
    }
  }
}

// prelu (a slope per channel or one for all, the kink at 0 and NaN) and glu (halves of a dim).
TEST(DeviceOps, PreluAndGluMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16}) {
    const Tensor kinks =
        Values(dtype, {2, 3, 2}, {0, -0.0, 1, -1, NAN, 2, -2, 0.5, -0.5, 3, -3, 0});
    const std::vector<std::vector<Tensor>> prelu = {
        {Input(dtype, {2, 3, 4}, 130), Input(dtype, {3}, 131)},
        {Input(dtype, {2, 3, 4}, 132), Input(dtype, {1}, 133)},
        {Input(dtype, {5}, 134), Input(dtype, {1}, 135)},
        {kinks, Input(dtype, {3}, 136)}};
    for (const std::vector<Tensor>& in : prelu) {
      EXPECT_TRUE(SameOnDevice(device, "prelu", in)) << DTypeName(dtype);
      if (dtype == DType::kF64) EXPECT_TRUE(SameGradientsOnDevice(device, "prelu", in));
    }
    for (const auto& [shape, dim] :
         std::vector<std::pair<Shape, int64_t>>{{{2, 6}, -1}, {{4, 3, 2}, 0}, {{3, 4, 5}, 1}}) {
      const AttrMap attrs = {{"dim", dim}};
      EXPECT_TRUE(SameOnDevice(device, "glu", {Input(dtype, shape, 137)}, attrs))
          << DTypeName(dtype) << " " << ShapeToString(shape);
      if (dtype == DType::kF64) {
        EXPECT_TRUE(SameGradientsOnDevice(device, "glu", {Input(dtype, shape, 138)}, attrs))
            << ShapeToString(shape);
      }
    }
  }
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

// erfinv near its poles, at both signed zeros, on both sides of the switch at 0.5 and outside
// [-1, 1]: the CPU's algorithm, run in double on the device.
TEST(DeviceOps, ErfinvMatchesTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  const std::vector<double> v = {-0.0,     0,         0.3, -0.49, 0.5, 0.51, 0.9,   -0.999,
                                 0.999999, 1 - 1e-12, 1,   -1,    1.5, NAN,  1e-10, -0.75};
  for (DType dtype : {DType::kF32, DType::kF64}) {
    const Tensor x = Values(dtype, {static_cast<int64_t>(v.size())}, v);
    EXPECT_TRUE(SameOnDevice(device, "erfinv", {x}, {}, 4)) << DTypeName(dtype);
  }
  EXPECT_TRUE(SameGradientsOnDevice(device, "erfinv",
                                    {Values(DType::kF64, {4}, {0.1, -0.6, 0.95, 0})}, {}, 4));
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

TEST(DeviceOps, ShapeCreationAndReductionOpsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  const AttrMap none;
  for (DType dtype : kDTypes) {
    Tensor x = Input(dtype, {2, 3, 4}, 70);
    for (const auto& [op, attrs] : UnaryShapeCases()) {
      EXPECT_TRUE(SameOnDevice(device, op, {x}, attrs)) << op << " " << DTypeName(dtype);
    }
    EXPECT_TRUE(SameOnDevice(device, "expand", {Input(dtype, {3, 1}, 71)},
                             {{"size", std::vector<int64_t>{2, 3, 5}}}));
    for (DType to : kDTypes) {
      EXPECT_TRUE(SameOnDevice(device, "to_dtype", {x}, {{"dtype", std::string(DTypeName(to))}}))
          << DTypeName(dtype) << " -> " << DTypeName(to);
    }
    for (const std::string& op : kCreationOps) {
      AttrMap attrs = {{"shape", std::vector<int64_t>{2, 3}},
                       {"dtype", std::string(DTypeName(dtype))}};
      if (op == "full") attrs["value"] = 1.0;
      EXPECT_TRUE(SameOnDevice(device, op, {}, attrs)) << op;
    }
    for (const std::string& op : kReductionOps) {
      const std::string& name = op;
      std::vector<AttrMap> variants = {none, {{"keepdim", true}}};
      if (name == "prod") {
        variants.push_back({{"dim", int64_t{1}}});
      } else {
        variants.push_back({{"dim", std::vector<int64_t>{0, 2}}});
        variants.push_back({{"dim", std::vector<int64_t>{-1}}, {"keepdim", true}});
      }
      for (const AttrMap& attrs : variants) {
        EXPECT_TRUE(SameOnDevice(device, op, {x}, attrs, 4)) << op << " " << DTypeName(dtype);
        EXPECT_TRUE(SameOnDevice(device, op, {Input(dtype, {0, 3}, 72)}, attrs)) << op << " empty";
      }
    }
  }
  Tensor target = MoveTo(Input(DType::kF32, {2, 3}, 80), device);
  CallEnv env;
  env.no_grad = true;
  auto assigned = DeviceDispatcher().Call(
      "assign", {target, MoveTo(Input(DType::kI64, {3}, 81), device)}, {}, env);
  ASSERT_TRUE(assigned.ok()) << assigned.status();
  EXPECT_EQ((*assigned)[0].storage(), target.storage());
  EXPECT_EQ(target.storage()->version(), 1u);
  Tensor expected = Run1(
      "expand", {Run1("to_dtype", {Input(DType::kI64, {3}, 81)}, {{"dtype", std::string("f32")}})},
      {{"size", std::vector<int64_t>{2, 3}}});
  EXPECT_TRUE(AllClose(MoveTo(target, kHostDevice), expected));
  // Gradients of reductions and views, f64.
  for (const auto& [op, attrs] : std::vector<std::pair<std::string, AttrMap>>{
           {"sum", {{"dim", std::vector<int64_t>{1}}}},
           {"mean", none},
           {"permute", {{"dims", std::vector<int64_t>{1, 0}}}},
           {"expand", {{"size", std::vector<int64_t>{4, 2, 3}}}}}) {
    EXPECT_TRUE(SameGradientsOnDevice(device, op, {Input(DType::kF64, {2, 3}, 90)}, attrs)) << op;
  }
}

// The creation ops that compute values, and the random ones: with a seed, the same stream on
// both devices (rand and dropout exactly, randn up to the device's log, cos and sin).
const std::vector<std::pair<std::string, AttrMap>> kComputedCreationCases = {
    {"arange", {{"end", int64_t{7}}}},
    {"arange", {{"start", 2.5}, {"end", -3.0}, {"step", -0.75}}},
    {"arange",
     {{"start", int64_t{-4}},
      {"end", int64_t{20}},
      {"step", int64_t{3}},
      {"dtype", std::string("i32")}}},
    {"arange", {{"start", 0.5}, {"end", 4.0}, {"dtype", std::string("i64")}}},
    {"arange", {{"end", 5.0}, {"dtype", std::string("f64")}}},
    {"arange", {{"end", 0.0}}},
    {"eye", {{"n", int64_t{4}}}},
    {"eye", {{"n", int64_t{3}}, {"m", int64_t{5}}, {"dtype", std::string("i64")}}},
    {"eye", {{"n", int64_t{4}}, {"m", int64_t{2}}, {"dtype", std::string("bf16")}}},
    {"rand", {{"shape", std::vector<int64_t>{3, 5}}, {"seed", int64_t{7}}}},
    {"rand",
     {{"shape", std::vector<int64_t>{9}}, {"seed", int64_t{-3}}, {"dtype", std::string("f64")}}},
    {"randn", {{"shape", std::vector<int64_t>{4, 3}}, {"seed", int64_t{11}}}},
    {"randn",
     {{"shape", std::vector<int64_t>{7}}, {"seed", int64_t{12}}, {"dtype", std::string("f64")}}},
    {"randint",
     {{"high", int64_t{10}}, {"shape", std::vector<int64_t>{4, 6}}, {"seed", int64_t{2}}}},
    {"randint",
     {{"low", int64_t{-5}},
      {"high", int64_t{3}},
      {"shape", std::vector<int64_t>{17}},
      {"seed", int64_t{4}},
      {"dtype", std::string("i32")}}},
    {"randint",
     {{"low", int64_t{-2}},
      {"high", int64_t{2}},
      {"shape", std::vector<int64_t>{9}},
      {"seed", int64_t{8}},
      {"dtype", std::string("f64")}}},
    // A range of 2^63 + 1: about half the stream's values are redrawn.
    {"randint",
     {{"low", -(int64_t{1} << 62)},
      {"high", (int64_t{1} << 62) + 1},
      {"shape", std::vector<int64_t>{300}},
      {"seed", int64_t{3}}}},
};

TEST(DeviceOps, ComputedAndRandomCreationMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  UnsupportedCalls().clear();
  for (const auto& [op, attrs] : kComputedCreationCases) {
    EXPECT_TRUE(SameOnDevice(device, op, {}, attrs, op == "randn" ? 64 : 1)) << op;
  }
  // dropout's mask comes from its seed: the same elements dropped, forward and backward.
  for (DType dtype : {DType::kF32, DType::kF64}) {
    const AttrMap attrs = {{"p", 0.3}, {"seed", int64_t{5}}};
    const Tensor x = Input(dtype, {6, 7}, 120);
    EXPECT_TRUE(SameOnDevice(device, "dropout", {x}, attrs)) << DTypeName(dtype);
    if (dtype == DType::kF64) EXPECT_TRUE(SameGradientsOnDevice(device, "dropout", {x}, attrs));
  }
  // Without a seed, two draws differ.
  CallEnv env;
  env.device = device;
  auto a = DeviceDispatcher().Call("rand", {}, {{"shape", std::vector<int64_t>{8}}}, env);
  auto b = DeviceDispatcher().Call("rand", {}, {{"shape", std::vector<int64_t>{8}}}, env);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)[0].device(), device);
  EXPECT_FALSE(AllClose(MoveTo((*a)[0], kHostDevice), MoveTo((*b)[0], kHostDevice), 0, 0));
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

TEST(DeviceOps, MatrixProductsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  const std::vector<std::pair<std::string, std::vector<Shape>>> cases = {
      {"mm", {{3, 4}, {4, 5}}},
      {"mm", {{3, 0}, {0, 5}}},
      {"bmm", {{2, 3, 4}, {2, 4, 5}}},
      {"matmul", {{4}, {4}}},
      {"matmul", {{3, 4}, {4}}},
      {"matmul", {{4}, {4, 5}}},
      {"matmul", {{2, 3, 4}, {4, 5}}},
      {"matmul", {{3, 4}, {2, 4, 5}}},
      {"matmul", {{2, 2, 3, 4}, {2, 2, 4, 5}}},
      {"matmul", {{2, 1, 3, 4}, {3, 4, 5}}},
      {"matmul", {{2, 1, 3, 4}, {1, 3, 4, 5}}},
      {"bmm", {{2, 3, 4}, {2, 4, 5}}},
      {"linear", {{2, 3}, {5, 3}, {5}}},
      {"linear", {{4, 2, 3}, {5, 3}}},
  };
  UnsupportedCalls().clear();
  for (const auto& [op, shapes] : cases) {
    for (DType dtype : kDTypes) {
      std::vector<Tensor> in;
      for (size_t i = 0; i < shapes.size(); ++i) in.push_back(Input(dtype, shapes[i], 100 + i));
      // Sums of products: a few ulps per term.
      EXPECT_TRUE(SameOnDevice(device, op, in, {}, 8))
          << op << " " << DTypeName(dtype) << " " << ShapeToString(shapes[0]);
      if (dtype == DType::kF64) EXPECT_TRUE(SameGradientsOnDevice(device, op, in, {}, 8)) << op;
    }
  }
  // Batch dimensions broadcast only in part ([2, 1] against [3]) run too: the operand is
  // expanded on the device first.
  EXPECT_TRUE(UnsupportedCalls().empty()) << *UnsupportedCalls().begin();
}

// The optimizer steps write param and state in place: each step runs on CPU copies and on
// device copies of the same tensors, and everything written is compared after every step.
const std::vector<std::pair<std::string, AttrMap>> kOptimizerCases = {
    {"sgd", {{"lr", 0.1}}},
    {"sgd", {{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.1}, {"weight_decay", 0.01}}},
    {"sgd", {{"lr", 0.1}, {"momentum", 0.8}, {"nesterov", true}, {"maximize", true}}},
    {"adam", {{"lr", 0.01}, {"weight_decay", 0.1}}},
    {"adam", {{"lr", 0.01}, {"amsgrad", true}, {"maximize", true}}},
    {"adamw", {{"lr", 0.02}, {"betas", std::vector<double>{0.8, 0.99}}, {"amsgrad", true}}},
};

TEST(DeviceOps, OptimizerStepsMatchTheCpu) {
  TENSORD_REQUIRE_DEVICE(device);
  for (const auto& [op, attrs] : kOptimizerCases) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      // param, then its state in the op's input order (after grad).
      std::vector<Tensor> cpu = {Input(dtype, {5, 3}, 140)};
      auto zeros = [&] { return Run1("zeros_like", {cpu[0]}); };
      const Tensor step = Values(DType::kI64, {}, {0});
      if (op == "sgd" && attrs.count("momentum")) {
        cpu.insert(cpu.end(), {zeros(), step});
      } else if (op != "sgd") {
        cpu.insert(cpu.end(), {zeros(), zeros(), step});
        if (attrs.count("amsgrad")) cpu.push_back(zeros());
      }
      std::vector<Tensor> dev;
      for (const Tensor& t : cpu) dev.push_back(MoveTo(t, device));
      CallEnv env;
      env.no_grad = true;
      for (int k = 0; k < 3; ++k) {
        const Tensor grad = Input(dtype, {5, 3}, 150 + k);
        auto args = [&](const std::vector<Tensor>& s, const Tensor& g) {
          std::vector<Tensor> a = {s[0], g};
          a.insert(a.end(), s.begin() + 1, s.end());
          return a;
        };
        auto on_cpu = DeviceDispatcher().Call(op, args(cpu, grad), attrs, env);
        auto on_dev = DeviceDispatcher().Call(op, args(dev, MoveTo(grad, device)), attrs, env);
        ASSERT_TRUE(on_cpu.ok() && on_dev.ok())
            << op << ": " << on_cpu.status() << " / " << on_dev.status();
        for (size_t i = 0; i < cpu.size(); ++i) {
          const Tolerance tol = ToleranceFor(cpu[i].dtype());
          EXPECT_TRUE(AllClose(MoveTo(dev[i], kHostDevice), cpu[i], tol.rtol, tol.atol))
              << op << " " << DTypeName(dtype) << " tensor " << i << " after step " << k + 1;
        }
      }
    }
  }
}

TEST(DeviceOps, EveryListedOpIsCovered) {
  TENSORD_REQUIRE_DEVICE(device);
  std::set<std::string> shape_test(kCreationOps.begin(), kCreationOps.end());
  shape_test.insert(kReductionOps.begin(), kReductionOps.end());
  shape_test.insert(kOtherShapeOps.begin(), kOtherShapeOps.end());
  shape_test.insert(kProductOps.begin(), kProductOps.end());
  for (const auto& [op, attrs] : UnaryShapeCases()) shape_test.insert(op);
  for (const auto& [op, attrs] : kOptimizerCases) shape_test.insert(op);
  for (const auto& [op, attrs] : kComputedCreationCases) shape_test.insert(op);
  for (const auto& [op, attrs] : GroupOpCases()) shape_test.insert(op);
  for (const ShapedCase& c : LayoutOpCases()) shape_test.insert(c.op);
  for (const ShapedCase& c : NnOpCases()) shape_test.insert(c.op);
  for (const ShapedCase& c : SortOpCases()) shape_test.insert(c.op);
  for (const IndexingCase& c : IndexingOpCases()) shape_test.insert(c.op);
  for (const std::string& op : ListedOps(device)) {
    const OpDef& def = Def(op);
    if (def.internal) continue;  // reached through the backward rules of the ops above
    // Collectives run in a process group, not a kernel of the device: tests/python's
    // test_collectives.py and the conformance rows run them on the device.
    if (def.collective != CollectiveKind::kNone) continue;
    EXPECT_TRUE(InElementwiseTest(def) || shape_test.count(op))
        << op << " is listed for " << device << " but not tested";
  }
}

}  // namespace
}  // namespace tensord::testing
