#include "tests/gpu/gpu_test_util.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "server/backends/gpu/gpu_backend.h"
#include "server/backends/opencl/opencl_runtime.h"
#include "server/backends/registered_backends.h"
#include "server/core/status.h"
#include "tests/gpu/nvrtc_cross_compile.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {

namespace {

// The backends under test: every device found, or, with TENSORD_TEST_NVRTC=1 in a build with
// the CUDA toolkit, the OpenCL devices with every kernel also compiled in the CUDA dialect.
std::vector<std::unique_ptr<Backend>> BackendsUnderTest() {
  if (!NvrtcCrossCompileRequested()) return MakeBackends();
  std::vector<std::unique_ptr<Backend>> out;
  out.push_back(MakeCpuBackend(CpuBackendOptions{}));
  std::vector<gpu::GpuDevice> devices;
  for (const auto& d : opencl::Devices()) {
    devices.push_back({CrossCompiling(d),
                       {d->name(), "opencl", d->description(), d->vendor(), d->memory_bytes()}});
  }
  out.push_back(gpu::MakeGpuBackend("opencl", std::move(devices)));
  return out;
}

}  // namespace

const Dispatcher& DeviceDispatcher() {
  static const Dispatcher* d = new Dispatcher(OpRegistry::Builtin(), BackendsUnderTest());
  return *d;
}

std::string DeviceUnderTest() {
  const char* env = std::getenv("TENSORD_TEST_GPU_DEVICE");
  for (const DeviceInfo& d : DeviceDispatcher().Devices()) {
    if (d.name == kHostDevice) continue;
    // The device named, or else the first; "" when the machine lacks it (the test then fails
    // under TENSORD_REQUIRE_GPU, or skips).
    if (env == nullptr || d.name == env) return d.name;
  }
  return "";
}

Tensor MoveTo(const Tensor& t, const std::string& device) {
  CallEnv env;
  env.no_grad = true;
  auto out = DeviceDispatcher().Call("to_device", {t}, {{"device", device}}, env);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : Tensor();
}

Tolerance ToleranceFor(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return {2e-5, 1e-5};
    case DType::kF64:
      return {1e-12, 1e-12};
    case DType::kBF16:
      return {1.6e-2, 1e-2};
    case DType::kF16:
      return {2e-3, 1e-3};
    default:
      return {0, 0};
  }
}

std::vector<Tensor> MoveAllTo(const std::vector<Tensor>& inputs, const std::string& device) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) out.push_back(t.wrapped_number() ? t : MoveTo(t, device));
  return out;
}

std::vector<Tensor> RandomInputs(const ShapedCase& c, DType dtype, uint32_t seed) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    in.push_back(Random(dtype, c.inputs[i], seed + i, -2, 2));
  return in;
}

namespace {

::testing::AssertionResult Compare(const std::string& what, const Tensor& on_device,
                                   const Tensor& on_cpu, double loose) {
  if (on_device.dtype() != on_cpu.dtype() || on_device.shape() != on_cpu.shape()) {
    return ::testing::AssertionFailure()
           << what << ": device gives " << DTypeName(on_device.dtype()) << " "
           << ShapeToString(on_device.shape()) << ", cpu " << DTypeName(on_cpu.dtype()) << " "
           << ShapeToString(on_cpu.shape());
  }
  Tensor back = MoveTo(on_device, kHostDevice);
  const Tolerance tol = ToleranceFor(on_cpu.dtype());
  ::testing::AssertionResult r = AllClose(back, on_cpu, tol.rtol * loose, tol.atol * loose);
  if (!r) return ::testing::AssertionFailure() << what << ": " << r.message();
  return ::testing::AssertionSuccess();
}

}  // namespace

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

std::set<std::string>& UnsupportedCalls() {
  static auto* s = new std::set<std::string>();
  return *s;
}

::testing::AssertionResult SameOnDevice(const std::string& device, const std::string& op,
                                        const std::vector<Tensor>& inputs, const AttrMap& attrs,
                                        double loose) {
  CallEnv cpu_env, device_env;
  cpu_env.no_grad = device_env.no_grad = true;
  device_env.device = device;
  auto on_cpu = DeviceDispatcher().Call(op, inputs, attrs, cpu_env);
  auto on_device = DeviceDispatcher().Call(op, MoveAllTo(inputs, device), attrs, device_env);
  if (!on_device.ok() && GetReason(on_device.status()) == Reason::kUnsupportedOnBackend) {
    UnsupportedCalls().insert(
        absl::StrCat(op, ":", inputs.empty() ? "-" : DTypeName(inputs[0].dtype())));
    return ::testing::AssertionSuccess();
  }
  if (!on_cpu.ok() || !on_device.ok()) {
    if (!on_cpu.ok() && !on_device.ok() &&
        GetReason(on_cpu.status()) == GetReason(on_device.status())) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << op << ": cpu " << on_cpu.status() << " / " << device << " " << on_device.status();
  }
  if (on_cpu->size() != on_device->size()) {
    return ::testing::AssertionFailure() << op << ": output counts differ";
  }
  for (size_t k = 0; k < on_cpu->size(); ++k) {
    if ((*on_device)[k].device() != device) {
      return ::testing::AssertionFailure() << op << ": output " << k << " is on "
                                           << (*on_device)[k].device() << ", not " << device;
    }
    auto r = Compare(absl::StrCat(op, " output ", k), (*on_device)[k], (*on_cpu)[k], loose);
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

namespace {

struct Gradients {
  absl::Status status;
  std::map<uint64_t, Tensor> by_leaf;
};

Gradients Backward(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                   const std::string& device) {
  AutodiffContext ctx(1, Checkpointing::kNone);
  CallEnv env;
  env.device = device;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  std::vector<Tensor> args = device == kHostDevice ? inputs : MoveAllTo(inputs, device);
  for (size_t i = 0; i < args.size(); ++i) {
    if (IsFloat(args[i].dtype()) && !args[i].wrapped_number()) {
      args[i].set_autograd(MakeLeafMeta(1, 100 + i));
    }
  }
  Gradients g;
  auto outs = DeviceDispatcher().Call(op, args, attrs, env);
  if (!outs.ok()) {
    g.status = outs.status();
    return g;
  }
  std::vector<Tensor> roots, seeds;
  for (size_t k = 0; k < outs->size(); ++k) {
    const Tensor& y = (*outs)[k];
    if (!y.autograd()) continue;
    Tensor w = Random(y.dtype(), y.shape(), 1234 + k, -1, 1);
    roots.push_back(y);
    seeds.push_back(device == kHostDevice ? w : MoveTo(w, device));
  }
  auto grads = DeviceDispatcher().Backward(ctx, roots, seeds, false, env);
  if (!grads.ok()) {
    g.status = grads.status();
    return g;
  }
  for (const LeafGradient& lg : *grads) g.by_leaf[lg.leaf->tensor_id] = lg.grad;
  return g;
}

}  // namespace

::testing::AssertionResult SameGradientsOnDevice(const std::string& device, const std::string& op,
                                                 const std::vector<Tensor>& inputs,
                                                 const AttrMap& attrs, double loose) {
  Gradients cpu = Backward(op, inputs, attrs, kHostDevice);
  Gradients dev = Backward(op, inputs, attrs, device);
  if (!dev.status.ok() && GetReason(dev.status) == Reason::kUnsupportedOnBackend) {
    UnsupportedCalls().insert(
        absl::StrCat(op, ":", inputs.empty() ? "-" : DTypeName(inputs[0].dtype())));
    return ::testing::AssertionSuccess();
  }
  if (!cpu.status.ok() || !dev.status.ok()) {
    if (GetReason(cpu.status) == GetReason(dev.status) && !cpu.status.ok()) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << op << " backward: cpu " << cpu.status << " / " << device << " " << dev.status;
  }
  for (const auto& [leaf, grad] : cpu.by_leaf) {
    auto it = dev.by_leaf.find(leaf);
    if (it == dev.by_leaf.end()) {
      return ::testing::AssertionFailure()
             << op << ": no gradient on " << device << " for input " << leaf - 100;
    }
    if (it->second.device() != device) {
      return ::testing::AssertionFailure()
             << op << ": gradient of input " << leaf - 100 << " is on " << it->second.device();
    }
    auto r = Compare(absl::StrCat(op, " gradient of input ", leaf - 100), it->second, grad, loose);
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

const std::vector<std::pair<std::string, AttrMap>>& GroupOpCases() {
  using Ints = std::vector<int64_t>;
  const AttrMap none;
  static const auto* cases = new std::vector<std::pair<std::string, AttrMap>>{
      {"amax", none},
      {"amax", {{"dim", Ints{0, 2}}}},
      {"amin", {{"dim", Ints{-1}}, {"keepdim", true}}},
      {"max", none},
      {"max", {{"dim", int64_t{1}}}},
      {"min", {{"dim", int64_t{-1}}, {"keepdim", true}}},
      {"min", none},
      {"argmax", none},
      {"argmax", {{"dim", int64_t{1}}}},
      {"argmin", {{"dim", int64_t{0}}, {"keepdim", true}}},
      {"var", none},
      {"var", {{"dim", Ints{1}}}},
      {"var", {{"dim", Ints{0, 2}}, {"correction", 0.0}, {"keepdim", true}}},
      {"std", {{"dim", Ints{2}}, {"unbiased", false}}},
      {"std", {{"dim", Ints{0}}, {"correction", 2.0}}},  // divisor 0: inf / NaN
      {"logsumexp", {{"dim", Ints{1}}}},
      {"logsumexp", {{"dim", Ints{0, 2}}, {"keepdim", true}}},
      {"norm", none},
      {"norm", {{"p", 1.0}, {"dim", Ints{1}}}},
      {"norm", {{"p", 0.0}, {"dim", Ints{2}}}},
      {"norm", {{"p", std::numeric_limits<double>::infinity()}, {"dim", Ints{1}}}},
      {"norm", {{"p", -std::numeric_limits<double>::infinity()}}},
      {"norm", {{"p", 3.0}, {"dim", Ints{0, 1}}, {"keepdim", true}}},
      {"norm", {{"p", 0.5}, {"dim", Ints{2}}}},
      {"norm", {{"p", 1.5}, {"dim", Ints{2}}}},
      {"softmax", {{"dim", int64_t{1}}}},
      {"softmax", {{"dim", int64_t{-1}}, {"dtype", std::string("f64")}}},
      {"log_softmax", {{"dim", int64_t{0}}}},
      {"log_softmax", {{"dim", int64_t{-1}}}},
      {"cumsum", {{"dim", int64_t{1}}}},
      {"cumsum", {{"dim", int64_t{-1}}, {"dtype", std::string("f64")}}},
      {"cumprod", {{"dim", int64_t{0}}}},
      {"cumprod", {{"dim", int64_t{2}}}},
  };
  return *cases;
}

const std::vector<ShapedCase>& LayoutOpCases() {
  using Ints = std::vector<int64_t>;
  const std::string constant = "constant";
  static const auto* cases = new std::vector<ShapedCase>{
      {"cat", {{2, 3}, {1, 3}, {0, 3}}, {{"dim", int64_t{0}}}},
      {"cat", {{2, 1}, {2, 3}}, {{"dim", int64_t{-1}}}},
      {"cat", {{0}, {2, 3}, {2, 2}}, {{"dim", int64_t{1}}}},  // the [0] input is skipped
      {"stack", {{2, 3}, {2, 3}}, {{"dim", int64_t{0}}}},
      {"stack", {{2, 3}, {2, 3}, {2, 3}}, {{"dim", int64_t{2}}}},
      {"stack", {{}, {}}, {}},
      {"split", {{5, 3}}, {{"split_size", Ints{2}}}},
      {"split", {{2, 6}}, {{"split_size", Ints{1, 0, 5}}, {"dim", int64_t{1}}}},
      {"chunk", {{2, 7}}, {{"chunks", int64_t{3}}, {"dim", int64_t{1}}}},
      {"narrow", {{4, 5}}, {{"dim", int64_t{1}}, {"start", int64_t{1}}, {"length", int64_t{3}}}},
      {"narrow", {{4, 5}}, {{"dim", int64_t{0}}, {"start", int64_t{-2}}, {"length", int64_t{2}}}},
      {"slice", {{6, 4}}, {{"start", int64_t{1}}, {"end", int64_t{5}}, {"step", int64_t{2}}}},
      {"slice",
       {{3, 7}},
       {{"dim", int64_t{-1}}, {"start", int64_t{-5}}, {"end", int64_t{100}}, {"step", int64_t{3}}}},
      {"flip", {{2, 3, 4}}, {{"dims", Ints{0, 2}}}},
      {"flip", {{3, 4}}, {{"dims", Ints{-1}}}},
      {"roll", {{3, 4}}, {{"shifts", Ints{1, -2}}, {"dims", Ints{0, 1}}}},
      {"roll", {{3, 4}}, {{"shifts", Ints{17}}}},  // the flattened tensor, past its size
      {"repeat", {{2, 3}}, {{"repeats", Ints{2, 1, 3}}}},
      {"tile", {{2, 3}}, {{"dims", Ints{2}}}},
      {"tril", {{3, 4}}, {}},
      {"tril", {{2, 3, 3}}, {{"diagonal", int64_t{-1}}}},
      {"triu", {{3, 4}}, {{"diagonal", int64_t{1}}}},
      {"triu", {{2, 4, 3}}, {{"diagonal", int64_t{-2}}}},
      {"pad", {{2, 3, 4}}, {{"pad", Ints{1, 2}}, {"value", 1.5}}},
      {"pad", {{2, 3, 4}}, {{"pad", Ints{-1, 2, 0, 1, 1, 0}}, {"mode", constant}}},
      {"pad", {{2, 3, 4}}, {{"pad", Ints{2, 1}}, {"mode", std::string("reflect")}}},
      {"pad", {{2, 3, 4}}, {{"pad", Ints{1, 3, 2, 1}}, {"mode", std::string("replicate")}}},
      {"pad", {{2, 3, 4}}, {{"pad", Ints{1, 2, 2, 0}}, {"mode", std::string("reflect")}}},
      {"pad", {{1, 2, 3, 4}}, {{"pad", Ints{3, 2, 1, 1}}, {"mode", std::string("circular")}}},
      {"pad", {{2, 3, 5}}, {{"pad", Ints{-1, 2}}, {"mode", std::string("circular")}}},
      {"diagonal", {{3, 4}}, {}},
      {"diagonal", {{3, 4}}, {{"offset", int64_t{1}}}},
      {"diagonal", {{4, 3}}, {{"offset", int64_t{-2}}}},
      {"diagonal",
       {{2, 3, 4}},
       {{"offset", int64_t{1}}, {"dim1", int64_t{2}}, {"dim2", int64_t{0}}}},
      {"diagonal", {{3, 4}}, {{"offset", int64_t{9}}}},  // past the matrix: empty
  };
  return *cases;
}

const std::vector<ShapedCase>& NnOpCases() {
  using Ints = std::vector<int64_t>;
  static const auto* cases = new std::vector<ShapedCase>{
      {"layer_norm", {{2, 3, 4}, {4}, {4}}, {{"normalized_shape", Ints{4}}}},
      {"layer_norm", {{2, 3, 4}, {3, 4}}, {{"normalized_shape", Ints{3, 4}}, {"eps", 1e-3}}},
      {"layer_norm", {{2, 3, 4}}, {{"normalized_shape", Ints{2, 3, 4}}}},
      {"layer_norm", {{5}, {5}, {5}}, {{"normalized_shape", Ints{5}}}},
      {"layer_norm", {{0, 4}, {4}, {4}}, {{"normalized_shape", Ints{4}}}},
      {"layer_norm", {{3, 1}, {1}, {1}}, {{"normalized_shape", Ints{1}}}},  // var 0: 1/sqrt(eps)
      {"conv2d", {{2, 3, 5, 6}, {4, 3, 3, 3}, {4}}, {{"padding", Ints{1}}}},
      {"conv2d",
       {{1, 4, 7, 7}, {6, 2, 3, 2}},
       {{"groups", int64_t{2}},
        {"stride", Ints{2, 1}},
        {"padding", Ints{1, 0}},
        {"dilation", Ints{2, 1}}}},
      {"conv2d", {{3, 5, 5}, {2, 3, 1, 1}}, {}},  // unbatched
      {"conv2d", {{2, 2, 4, 4}, {2, 2, 4, 4}, {2}}, {{"stride", Ints{2}}}},
      {"conv2d", {{0, 3, 4, 4}, {2, 3, 3, 3}}, {}},
      {"conv2d", {{1, 2, 5, 4}, {3, 2, 2, 3}}, {{"padding", std::string("same")}}},
      {"conv1d", {{2, 3, 8}, {4, 3, 3}, {4}}, {{"padding", Ints{1}}, {"stride", Ints{2}}}},
      {"conv3d",
       {{2, 3, 4, 5, 4}, {4, 3, 2, 3, 2}, {4}},
       {{"stride", Ints{1, 2, 1}}, {"padding", Ints{1, 0, 1}}}},
      {"conv3d",
       {{1, 4, 5, 5, 5}, {2, 2, 3, 1, 2}},
       {{"groups", int64_t{2}}, {"dilation", Ints{2, 1, 1}}}},
      {"conv3d", {{3, 4, 4, 4}, {2, 3, 2, 2, 2}}, {}},  // unbatched
      {"conv_transpose2d",
       {{2, 4, 3, 5}, {4, 3, 3, 2}, {3}},
       {{"stride", Ints{2, 1}}, {"padding", Ints{1, 0}}, {"output_padding", Ints{1, 0}}}},
      {"conv_transpose2d",
       {{1, 4, 4, 4}, {4, 2, 3, 3}},
       {{"groups", int64_t{2}}, {"dilation", Ints{1, 2}}}},
      {"conv_transpose1d", {{2, 3, 6}, {3, 2, 3}}, {{"stride", Ints{2}}}},
      {"interpolate", {{2, 3, 4, 5}}, {{"size", Ints{7, 3}}}},
      {"interpolate", {{2, 3, 4, 5}}, {{"scale_factor", std::vector<double>{2.0}}}},
      {"interpolate", {{1, 2, 4, 5}}, {{"size", Ints{6, 9}}, {"mode", std::string("bilinear")}}},
      {"interpolate",
       {{1, 2, 5, 4}},
       {{"size", Ints{3, 7}}, {"mode", std::string("bilinear")}, {"align_corners", true}}},
      {"interpolate", {{2, 3, 6}}, {{"size", Ints{13}}, {"mode", std::string("linear")}}},
      {"interpolate",
       {{1, 2, 3, 4, 2}},
       {{"scale_factor", std::vector<double>{1.5, 2.0, 0.5}}, {"mode", std::string("trilinear")}}},
      {"max_pool2d", {{2, 3, 6, 7}}, {{"kernel_size", Ints{3}}}},
      {"max_pool2d",
       {{1, 2, 7, 8}},
       {{"kernel_size", Ints{3, 2}},
        {"stride", Ints{2, 3}},
        {"padding", Ints{1}},
        {"dilation", Ints{2, 1}},
        {"ceil_mode", true},
        {"return_indices", true}}},
      {"max_pool2d", {{3, 5, 5}}, {{"kernel_size", Ints{2}}, {"stride", Ints{1}}}},  // unbatched
      {"avg_pool2d", {{2, 3, 6, 7}}, {{"kernel_size", Ints{3}}, {"padding", Ints{1}}}},
      {"avg_pool2d",
       {{1, 2, 7, 8}},
       {{"kernel_size", Ints{3, 2}},
        {"stride", Ints{2}},
        {"padding", Ints{1, 1}},
        {"ceil_mode", true},
        {"count_include_pad", false}}},
      {"avg_pool2d", {{2, 2, 5, 5}}, {{"kernel_size", Ints{2}}, {"divisor_override", int64_t{3}}}},
      {"adaptive_avg_pool2d", {{2, 3, 7, 5}}, {{"output_size", Ints{3, 2}}}},
      {"adaptive_max_pool2d",
       {{2, 3, 7, 5}},
       {{"output_size", Ints{4, 3}}, {"return_indices", true}}},
      {"max_pool2d", {{0, 3, 4, 4}}, {{"kernel_size", Ints{2}}}},
  };
  return *cases;
}

const std::vector<ShapedCase>& SortOpCases() {
  static const auto* cases = new std::vector<ShapedCase>{
      {"sort", {{3, 7}}, {}},
      {"sort", {{3, 7}}, {{"descending", true}}},
      {"sort", {{5, 2, 3}}, {{"dim", int64_t{0}}, {"stable", true}}},
      {"sort", {{}}, {}},
      {"sort", {{0, 4}}, {}},
      {"argsort", {{4, 6}}, {{"descending", true}}},
      {"argsort", {{6, 4}}, {{"dim", int64_t{0}}}},
      {"topk", {{3, 8}}, {{"k", int64_t{3}}}},
      {"topk", {{6, 2, 3}}, {{"k", int64_t{2}}, {"dim", int64_t{0}}, {"largest", false}}},
      {"topk", {{3, 5}}, {{"k", int64_t{0}}}},
      {"topk", {{}}, {{"k", int64_t{1}}}},
  };
  return *cases;
}

const std::vector<IndexingCase>& IndexingOpCases() {
  // Indices in [0, size): i64 unless asked otherwise.
  auto idx = [](Shape shape, int64_t size, uint32_t seed, DType dtype = DType::kI64) {
    return Random(dtype, std::move(shape), seed, 0, static_cast<double>(size));
  };
  auto x = [](DType d, Shape shape, uint32_t seed) {
    return Random(d, std::move(shape), seed, -3, 3);
  };
  // Integers in [-2, 2]: about one element in five is zero (false for bool).
  auto sparse = [](DType d, Shape shape, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> pick(-2, 2);
    std::vector<double> v(NumElements(shape));
    for (double& e : v) e = pick(gen);
    return Values(d, std::move(shape), v);
  };
  auto mask = [](Shape shape, uint32_t seed) {
    return Random(DType::kBool, std::move(shape), seed);
  };
  const AttrMap dim0 = {{"dim", int64_t{0}}}, dim1 = {{"dim", int64_t{1}}};
  const AttrMap as_tuple = {{"as_tuple", true}};
  static const auto* cases = new std::vector<IndexingCase>{
      {"index_select",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {4, 5}, 1), idx({6}, 5, 2)};
       },
       dim1},
      {"index_select",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {4, 5}, 3), idx({3}, 4, 4, DType::kI32)};
       },
       dim0},
      {"index_select",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {4, 5}, 5), idx({0}, 4, 6)};
       },
       dim0},
      {"gather",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {3, 4}, 7), idx({3, 2}, 4, 8)};
       },
       dim1},
      {"gather",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {3, 5}, 9), idx({2, 3}, 3, 10, DType::kI32)};
       },
       dim0},
      {"scatter",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {3, 5}, 11), idx({3, 4}, 5, 12), x(d, {3, 6}, 13)};
       },
       dim1},
      {"scatter",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {4, 3}, 14), idx({6, 2}, 4, 15), ScalarOperand(2.5)};
       },
       dim0},
      {"scatter_add",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {3, 5}, 16), idx({3, 4}, 5, 17), x(d, {3, 4}, 18)};
       },
       dim1},
      {"scatter_add",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {2, 3}, 19), idx({5, 3}, 2, 20, DType::kI32),
                                    x(d, {5, 3}, 21)};
       },
       dim0},
      {"index_add",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {5, 3}, 22), idx({4}, 5, 23), x(d, {4, 3}, 24)};
       },
       {{"dim", int64_t{0}}, {"alpha", 2.0}}},
      {"index_add",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {2, 4, 3}, 25), idx({6}, 4, 26), x(d, {2, 6, 3}, 27)};
       },
       dim1},
      {"masked_fill",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {3, 4}, 28), Random(DType::kBool, {4}, 29)};
       },
       {{"value", -1.5}}},
      {"masked_fill",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {3, 1}, 30), Random(DType::kBool, {3, 4}, 31)};
       },
       {{"value", 0.5}}},
      {"one_hot",
       [=](DType d) { return std::vector<Tensor>{idx({5}, 4, 32, IsInt(d) ? d : DType::kI64)}; },
       {}},
      {"one_hot",
       [=](DType d) {
         return std::vector<Tensor>{idx({2, 3}, 6, 33, IsInt(d) ? d : DType::kI32)};
       },
       {{"num_classes", int64_t{7}}}},
      {"embedding",
       [=](DType d) {
         return std::vector<Tensor>{idx({2, 3}, 5, 34), x(d, {5, 4}, 35)};
       },
       {}},
      {"embedding",
       [=](DType d) {
         return std::vector<Tensor>{idx({7}, 5, 36, DType::kI32), x(d, {5, 2}, 37)};
       },
       {{"padding_idx", int64_t{-4}}}},
      // The selections: a size that only the data gives, and scans over many chunks.
      {"nonzero",
       [=](DType d) {
         return std::vector<Tensor>{sparse(d, {3, 4, 5}, 38)};
       },
       {}},
      {"nonzero", [=](DType d) { return std::vector<Tensor>{sparse(d, {70000}, 39)}; }, {}},
      {"nonzero",
       [=](DType d) {
         return std::vector<Tensor>{sparse(d, {0, 3}, 40)};
       },
       {}},
      {"nonzero", [=](DType d) { return std::vector<Tensor>{Values(d, {}, {2})}; }, {}},
      {"nonzero",
       [=](DType d) {
         return std::vector<Tensor>{sparse(d, {40, 9}, 41)};
       },
       as_tuple},
      {"nonzero", [=](DType d) { return std::vector<Tensor>{Values(d, {}, {1})}; }, as_tuple},
      {"masked_select",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {3, 4}, 42), mask({4}, 43)};
       },
       {}},
      {"masked_select",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {3, 1}, 44), mask({2, 3, 5}, 45)};
       },
       {}},
      {"masked_select",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {300, 70}, 46), mask({70}, 47)};
       },
       {}},
      {"masked_select",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {2, 3}, 48),
                                    Values(DType::kBool, {2, 3}, {0, 0, 0, 0, 0, 0})};
       },
       {}},
      {"masked_select",
       [=](DType d) {
         return std::vector<Tensor>{x(d, {}, 49), Values(DType::kBool, {}, {1})};
       },
       {}},
  };
  return *cases;
}

}  // namespace tensord::testing
