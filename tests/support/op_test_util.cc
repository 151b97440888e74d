#include "tests/support/op_test_util.h"

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "server/backends/cpu/cpu_backend.h"
#include "server/core/status.h"

namespace tensord::testing {

const Dispatcher& TestDispatcher() {
  static const Dispatcher* d = [] {
    std::vector<std::unique_ptr<Backend>> backends;
    backends.push_back(MakeCpuBackend());
    return new Dispatcher(OpRegistry::Builtin(), std::move(backends));
  }();
  return *d;
}

absl::StatusOr<std::vector<Tensor>> RunOp(const std::string& op, std::vector<Tensor> inputs,
                                          const AttrMap& attrs) {
  CallEnv env;
  return TestDispatcher().Call(op, std::move(inputs), attrs, env);
}

Tensor Run1(const std::string& op, std::vector<Tensor> inputs, const AttrMap& attrs) {
  auto out = RunOp(op, std::move(inputs), attrs);
  EXPECT_TRUE(out.ok()) << op << ": " << out.status();
  if (!out.ok() || out->empty()) return Tensor();
  return (*out)[0];
}

Tensor Values(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t = Tensor::Empty(dtype, std::move(shape)).value();
  if (IsLowPrecision(dtype)) {
    // Rounded from f32, as to_dtype from f32 rounds.
    uint16_t* bits = static_cast<uint16_t*>(t.raw());
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float f = static_cast<float>(values[i]);
      bits[i] = dtype == DType::kBF16 ? FloatToBF16(f) : FloatToHalf(f);
    }
    return t;
  }
  TENSORD_DISPATCH_TYPED(dtype, [&] {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(values[i]);
  });
  return t;
}

Tensor Random(DType dtype, Shape shape, uint32_t seed, double lo, double hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  const int64_t n = NumElements(shape);
  std::vector<double> v(n);
  for (auto& x : v) {
    x = dist(gen);
    if (IsInt(dtype)) x = std::floor(x);
    if (IsBool(dtype)) x = x > (lo + hi) / 2 ? 1 : 0;
  }
  return Values(dtype, std::move(shape), v);
}

Tensor ScalarOperand(double v) {
  Tensor t = Tensor::Scalar<double>(v);
  t.set_wrapped_number(true);
  return t;
}

Tensor IntOperand(int64_t v) {
  Tensor t = Tensor::Scalar<int64_t>(v);
  t.set_wrapped_number(true);
  return t;
}

Tensor CastTo(const Tensor& t, DType dtype) {
  return Run1("to_dtype", {t}, {{"dtype", std::string(DTypeName(dtype))}});
}

::testing::AssertionResult AllClose(const Tensor& actual, const std::vector<double>& expected,
                                    double rtol, double atol) {
  if (!actual.defined()) return ::testing::AssertionFailure() << "tensor is undefined";
  if (actual.numel() != static_cast<int64_t>(expected.size())) {
    return ::testing::AssertionFailure()
           << "element count " << actual.numel() << " vs " << expected.size();
  }
  for (int64_t i = 0; i < actual.numel(); ++i) {
    double a = actual.ElementAsDouble(i), e = expected[i];
    if (std::isnan(a) && std::isnan(e)) continue;
    if (std::isinf(a) && a == e) continue;
    if (!(std::fabs(a - e) <= atol + rtol * std::fabs(e))) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << a << ", expected " << e
                                           << " (shape " << ShapeToString(actual.shape()) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult AllClose(const Tensor& actual, const Tensor& expected, double rtol,
                                    double atol) {
  if (actual.defined() && expected.defined() && actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "shape " << ShapeToString(actual.shape()) << " vs "
                                         << ShapeToString(expected.shape());
  }
  return AllClose(actual, expected.ToDoubles(), rtol, atol);
}

namespace {

// sum over outputs of sum(W_k * out_k), evaluated without autodiff.
absl::StatusOr<double> WeightedLoss(const std::string& op, const std::vector<Tensor>& inputs,
                                    const AttrMap& attrs, const std::vector<Tensor>& weights) {
  ASSIGN_OR_RETURN(std::vector<Tensor> outs, RunOp(op, inputs, attrs));
  double total = 0;
  for (size_t k = 0; k < outs.size() && k < weights.size(); ++k) {
    if (!weights[k].defined()) continue;
    for (int64_t i = 0; i < outs[k].numel(); ++i) {
      total += outs[k].ElementAsDouble(i) * weights[k].ElementAsDouble(i);
    }
  }
  return total;
}

Tensor Copy(const Tensor& t) {
  Tensor c = Tensor::Empty(t.dtype(), t.shape()).value();
  if (t.nbytes()) std::memcpy(c.raw(), t.raw(), t.nbytes());
  return c;
}

}  // namespace

::testing::AssertionResult GradCheck(const std::string& op, const std::vector<Tensor>& inputs,
                                     const AttrMap& attrs, const GradCheckOptions& options) {
  std::vector<int> wrt = options.wrt;
  if (wrt.empty()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (IsFloat(inputs[i].dtype())) wrt.push_back(static_cast<int>(i));
    }
  }
  // Forward under autodiff.
  AutodiffContext ctx(1, options.checkpointing);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  std::vector<Tensor> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor t = Copy(inputs[i]);
    if (std::find(wrt.begin(), wrt.end(), static_cast<int>(i)) != wrt.end()) {
      t.set_autograd(MakeLeafMeta(1, 100 + i));
    }
    args.push_back(t);
  }
  auto outs = TestDispatcher().Call(op, args, attrs, env);
  if (!outs.ok()) return ::testing::AssertionFailure() << op << " forward: " << outs.status();
  std::vector<Tensor> roots, seeds, weights(outs->size());
  for (size_t k = 0; k < outs->size(); ++k) {
    if (!(*outs)[k].autograd()) continue;
    weights[k] = Random((*outs)[k].dtype(), (*outs)[k].shape(), 1234 + k, -1, 1);
    roots.push_back((*outs)[k]);
    seeds.push_back(weights[k]);
  }
  if (roots.empty()) return ::testing::AssertionFailure() << op << ": no differentiable output";
  auto grads = TestDispatcher().Backward(ctx, roots, seeds, false, env);
  if (!grads.ok()) return ::testing::AssertionFailure() << op << " backward: " << grads.status();
  std::map<uint64_t, Tensor> by_id;
  for (const LeafGradient& g : *grads) by_id[g.leaf->tensor_id] = g.grad;

  for (int i : wrt) {
    Tensor analytic = by_id.count(100 + i) ? by_id[100 + i] : Tensor();
    if (analytic.defined() && analytic.shape() != inputs[i].shape()) {
      return ::testing::AssertionFailure()
             << op << ": gradient of input " << i << " has shape "
             << ShapeToString(analytic.shape()) << ", input " << ShapeToString(inputs[i].shape());
    }
    std::vector<Tensor> probe = inputs;
    for (int64_t e = 0; e < inputs[i].numel(); ++e) {
      Tensor plus = Copy(inputs[i]), minus = Copy(inputs[i]);
      TENSORD_DISPATCH_FLOAT(inputs[i].dtype(), [&] {
        plus.data<T>()[e] += static_cast<T>(options.eps);
        minus.data<T>()[e] -= static_cast<T>(options.eps);
      });
      probe[i] = plus;
      auto lp = WeightedLoss(op, probe, attrs, weights);
      probe[i] = minus;
      auto lm = WeightedLoss(op, probe, attrs, weights);
      if (!lp.ok() || !lm.ok())
        return ::testing::AssertionFailure() << op << ": perturbed forward failed";
      double numeric = (*lp - *lm) / (2 * options.eps);
      double got = analytic.defined() ? analytic.ElementAsDouble(e) : 0.0;
      if (!(std::fabs(got - numeric) <= options.atol + options.rtol * std::fabs(numeric))) {
        return ::testing::AssertionFailure() << op << ": d/d input" << i << "[" << e
                                             << "] autodiff " << got << " vs numeric " << numeric;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tensord::testing
