// Custom-op plugins through the client: the example plugin (examples/plugins) and a test
// plugin (tests/plugins) loaded by an in-process server. ListOps shows their ops with marking
// and origin; they compute; the marked ones differentiate (checked against finite
// differences); the unmarked one refuses autodiff tensors with OPERATION_NOT_MARKED_FOR_AUTODIFF
// naming the op and the plugin and leaves the session as it was; broken plugins are refused
// at start with a message naming the plugin and the defect.
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/plugins/plugin_loader.h"
#include "server/service/service_core.h"
#include "tests/service/service_env.h"
#include "tests/support/source_path.h"

namespace tensord::service_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kExample[] = TENSORD_EXAMPLE_PLUGIN;
constexpr char kExampleOrigin[] = "libtensord_example_ops.so";
constexpr char kTestOps[] = TENSORD_TEST_OPS_PLUGIN;
constexpr char kTestOpsOrigin[] = "libtensord_test_ops.so";

std::string Broken(const std::string& variant) {
  return absl::StrCat(TENSORD_BROKEN_PLUGIN_DIR, "/libtensord_test_broken_", variant, ".so");
}

std::vector<double> RandomValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = normal(rng);
  return v;
}

class PluginTest : public ServiceTest {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options = TestServerOptions();
    options.plugins = {kExample, kTestOps};
    env_ = StartServer(options).release();
  }

  static std::map<std::string, tc::OpInfo> Served() {
    std::map<std::string, tc::OpInfo> out;
    absl::StatusOr<std::vector<tc::OpInfo>> ops = client().Ops();
    EXPECT_TRUE(ops.ok()) << ops.status();
    if (ops.ok()) {
      for (const tc::OpInfo& op : *ops) out[op.name()] = op;
    }
    return out;
  }

  tc::SessionInfo Snapshot() {
    absl::StatusOr<tc::SessionInfo> info = session().Info();
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : tc::SessionInfo();
  }
};

// ---- discovery --------------------------------------------------------------------------------

TEST_F(PluginTest, ListOpsShowsPluginOpsWithMarkingAndOrigin) {
  std::map<std::string, tc::OpInfo> ops = Served();
  ASSERT_TRUE(ops.count("example_scaled_square"));
  ASSERT_TRUE(ops.count("example_clip_norm"));
  ASSERT_TRUE(ops.count("test_sum_diff"));
  ASSERT_TRUE(ops.count("test_count"));

  const tc::OpInfo& square = ops["example_scaled_square"];
  EXPECT_EQ(square.marking(), v1::MARKING_DIFFERENTIABLE);
  EXPECT_EQ(square.origin(), kExampleOrigin);
  EXPECT_EQ(square.category(), "plugin");
  EXPECT_EQ(square.min_inputs(), 1);
  EXPECT_EQ(square.max_inputs(), 1);
  EXPECT_THAT(square.input_names(), ElementsAre("input"));
  EXPECT_THAT(square.backends(), ElementsAre("cpu"));
  // The declared f32 and f64 (storage dtypes computed in f32 may be listed with them).
  EXPECT_THAT(square.dtypes(), ::testing::IsSupersetOf({v1::DTYPE_F32, v1::DTYPE_F64}));
  EXPECT_THAT(square.dtypes(), Not(::testing::Contains(v1::DTYPE_I32)));
  ASSERT_EQ(square.attrs_size(), 1);
  EXPECT_EQ(square.attrs(0).name(), "scale");
  EXPECT_EQ(square.attrs(0).type(), "float");
  EXPECT_FALSE(square.attrs(0).required());
  EXPECT_EQ(square.attrs(0).default_value().f(), 1.0);
  EXPECT_THAT(square.doc(), HasSubstr("scale * input^2"));

  const tc::OpInfo& clip = ops["example_clip_norm"];
  EXPECT_EQ(clip.marking(), v1::MARKING_UNMARKED);
  EXPECT_EQ(clip.origin(), kExampleOrigin);
  ASSERT_EQ(clip.attrs_size(), 2);
  EXPECT_EQ(clip.attrs(1).name(), "norm_type");
  EXPECT_EQ(clip.attrs(1).default_value().f(), 2.0);

  EXPECT_EQ(ops["test_sum_diff"].marking(), v1::MARKING_DIFFERENTIABLE);
  EXPECT_EQ(ops["test_sum_diff"].origin(), kTestOpsOrigin);
  const tc::OpInfo& count = ops["test_count"];
  EXPECT_EQ(count.marking(), v1::MARKING_NON_DIFFERENTIABLE);
  ASSERT_EQ(count.attrs_size(), 4);
  EXPECT_TRUE(count.attrs(0).required());
  EXPECT_EQ(count.attrs(1).type(), "bool");
  EXPECT_EQ(count.attrs(2).type(), "int");
  EXPECT_EQ(count.attrs(3).type(), "string");
  EXPECT_EQ(count.attrs(3).default_value().s(), "above");

  // The helper ops that run backward kernels are internal; built-ins keep their origin.
  EXPECT_FALSE(ops.count("example_scaled_square_backward"));
  EXPECT_FALSE(ops.count("test_sum_diff_backward"));
  EXPECT_EQ(ops["relu"].origin(), "builtin");
  EXPECT_EQ(server().op_count(), static_cast<int>(ops.size()));
}

TEST_F(PluginTest, HelperOpsAreRefusedFromClients) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, session().Put(tc::HostTensor(std::vector<float>{1, 2})));
  EXPECT_TRUE(FailsWith(Status(session().Op("example_scaled_square_backward", {x, x, x})),
                        absl::StatusCode::kInvalidArgument, v1::UNKNOWN_OP));
}

// ---- forward ----------------------------------------------------------------------------------

TEST_F(PluginTest, ScaledSquareForward) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x,
                       session().Put(tc::HostTensor(std::vector<float>{1, -2, 0.5, 3}, {2, 2})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, session().Op1("example_scaled_square", {x}));
  EXPECT_EQ(y.dtype(), tc::DType::kF32);
  EXPECT_EQ(y.shape(), (tc::Shape{2, 2}));
  EXPECT_THAT(Floats(y), ElementsAre(1, 4, 0.25, 9));
  ASSERT_OK_AND_ASSIGN(tc::Tensor scaled,
                       session().Op1("example_scaled_square", {x}, {{"scale", -0.5}}));
  EXPECT_THAT(Floats(scaled), ElementsAre(-0.5, -2, -0.125, -4.5));

  ASSERT_OK_AND_ASSIGN(tc::Tensor d,
                       session().Put(tc::HostTensor(std::vector<double>{0.1, -3}, {2})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor yd, session().Op1("example_scaled_square", {d}, {{"scale", 2}}));
  EXPECT_EQ(yd.dtype(), tc::DType::kF64);
  std::vector<double> v = Doubles(yd);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_DOUBLE_EQ(v[0], 2 * 0.1 * 0.1);
  EXPECT_DOUBLE_EQ(v[1], 18.0);

  ASSERT_OK_AND_ASSIGN(tc::Tensor empty,
                       session().Put(tc::HostTensor(std::vector<float>{}, {0, 3})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor ye, session().Op1("example_scaled_square", {empty}));
  EXPECT_EQ(ye.shape(), (tc::Shape{0, 3}));
}

// torch.nn.utils.clip_grad_norm_ on one tensor: coef = max_norm / (norm + 1e-6), at most 1.
std::vector<double> ClipReference(const std::vector<double>& x, double max_norm, double p) {
  double norm = 0;
  for (double v : x)
    norm = std::isinf(p) ? std::max(norm, std::abs(v)) : norm + std::pow(std::abs(v), p);
  if (!std::isinf(p)) norm = std::pow(norm, 1 / p);
  const double coef = std::min(1.0, max_norm / (norm + 1e-6));
  std::vector<double> out;
  for (double v : x) out.push_back(v * coef);
  return out;
}

TEST_F(PluginTest, ClipNormForward) {
  const std::vector<double> values = {3, -4, 1, 0.5, -2, 6};
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, session().Put(tc::HostTensor(values, {2, 3})));
  struct Case {
    double max_norm, norm_type;
  };
  for (const Case& c :
       {Case{1.0, 2.0}, Case{100.0, 2.0}, Case{2.0, 1.0}, Case{3.0, INFINITY}, Case{0.0, 2.0}}) {
    SCOPED_TRACE(absl::StrCat("max_norm=", c.max_norm, " norm_type=", c.norm_type));
    ASSERT_OK_AND_ASSIGN(tc::Tensor y,
                         session().Op1("example_clip_norm", {x},
                                       {{"max_norm", c.max_norm}, {"norm_type", c.norm_type}}));
    EXPECT_EQ(y.shape(), (tc::Shape{2, 3}));
    std::vector<double> got = Doubles(y), want = ClipReference(values, c.max_norm, c.norm_type);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
  }
  // Defaults: max_norm 1, the 2-norm.
  ASSERT_OK_AND_ASSIGN(tc::Tensor f, session().Put(tc::HostTensor(std::vector<float>{3, 4})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, session().Op1("example_clip_norm", {f}));
  EXPECT_THAT(Floats(y),
              ElementsAre(::testing::FloatNear(0.6f, 1e-6f), ::testing::FloatNear(0.8f, 1e-6f)));
}

TEST_F(PluginTest, PluginErrorsCarryReasonOpAndPlugin) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, session().Put(tc::HostTensor(std::vector<float>{3, 4})));
  absl::StatusOr<tc::Tensor> r = session().Op1("example_clip_norm", {x}, {{"max_norm", -1.0}});
  EXPECT_TRUE(FailsWith(Status(r), absl::StatusCode::kInvalidArgument, v1::BAD_ATTRIBUTE,
                        {{"op", "example_clip_norm"}, {"plugin", kExampleOrigin}}));
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("example_clip_norm (plugin libtensord_example_ops.so): max_norm must be "
                        ">= 0, got -1"));
  // The declared dtypes are checked by the server before the plugin is called.
  ASSERT_OK_AND_ASSIGN(tc::Tensor i, session().Put(tc::HostTensor(std::vector<int32_t>{1, 2})));
  EXPECT_TRUE(FailsWith(Status(session().Op1("example_scaled_square", {i})),
                        absl::StatusCode::kInvalidArgument, v1::DTYPE_MISMATCH,
                        {{"op", "example_scaled_square"}}));
  EXPECT_TRUE(FailsWith(Status(session().Op1("example_scaled_square", {x, x})),
                        absl::StatusCode::kInvalidArgument, v1::WRONG_ARITY));
  EXPECT_TRUE(FailsWith(Status(session().Op1("example_scaled_square", {x}, {{"scael", 2.0}})),
                        absl::StatusCode::kInvalidArgument, v1::BAD_ATTRIBUTE,
                        {{"attribute", "scael"}}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, session().Put(tc::HostTensor(std::vector<float>{1, 2, 3})));
  absl::StatusOr<std::vector<tc::Tensor>> mismatch = session().Op("test_sum_diff", {x, y});
  EXPECT_TRUE(FailsWith(Status(mismatch), absl::StatusCode::kInvalidArgument, v1::SHAPE_MISMATCH,
                        {{"op", "test_sum_diff"}, {"plugin", kTestOpsOrigin}}));
  EXPECT_THAT(std::string(mismatch.status().message()), HasSubstr("differ in dim 0: 2 vs 3"));
}

TEST_F(PluginTest, AttributesOfEveryType) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x,
                       session().Put(tc::HostTensor(std::vector<float>{-1, 0, 0.5, 2, 3})));
  auto count = [&](const tc::Attrs& attrs) -> int64_t {
    absl::StatusOr<tc::Tensor> c = session().Op1("test_count", {x}, attrs);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return -1;
    EXPECT_EQ(c->dtype(), tc::DType::kI64);
    EXPECT_EQ(c->shape(), tc::Shape{});
    absl::StatusOr<std::vector<int64_t>> v = c->ToVector<int64_t>();
    return v.ok() && v->size() == 1 ? (*v)[0] : -1;
  };
  EXPECT_EQ(count({{"threshold", 0.5}}), 2);
  EXPECT_EQ(count({{"threshold", 0.5}, {"inclusive", true}}), 3);
  EXPECT_EQ(count({{"threshold", 2}, {"offset", 10}}), 11) << "an int threshold widens to float";
  EXPECT_EQ(count({{"threshold", 0.5}, {"mode", "below"}}), 2);
  EXPECT_EQ(count({{"threshold", 0.5}, {"mode", "below"}, {"inclusive", true}, {"offset", -1}}), 2);
  EXPECT_TRUE(FailsWith(Status(session().Op1("test_count", {x})),
                        absl::StatusCode::kInvalidArgument, v1::BAD_ATTRIBUTE,
                        {{"attribute", "threshold"}}));
  absl::StatusOr<tc::Tensor> bad =
      session().Op1("test_count", {x}, {{"threshold", 0.0}, {"mode", "sideways"}});
  EXPECT_TRUE(FailsWith(Status(bad), absl::StatusCode::kInvalidArgument, v1::BAD_ATTRIBUTE,
                        {{"op", "test_count"}, {"plugin", kTestOpsOrigin}}));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("got 'sideways'"));
}

// ---- autodiff ---------------------------------------------------------------------------------

// sum(example_scaled_square(tanh(x), scale) * w), computed without recording.
absl::StatusOr<double> SquareLoss(tc::Session& s, const tc::HostTensor& x, const tc::HostTensor& w,
                                  double scale) {
  tc::Batch batch = s.NewBatch({/*no_grad=*/true});
  tc::CallRef y = batch.Add("example_scaled_square", {batch.Add("tanh", {x})}, {{"scale", scale}});
  tc::CallRef total = batch.Add("sum", {batch.Add("mul", {y, w})}, {}, {false, /*fetch=*/true});
  absl::StatusOr<tc::BatchResult> r = batch.Run();
  if (!r.ok()) return r.status();
  return r->value(total).ToDoubles().at(0);
}

class PluginGradientTest : public PluginTest,
                           public ::testing::WithParamInterface<tc::Checkpointing> {};

TEST_P(PluginGradientTest, ScaledSquareMatchesFiniteDifferences) {
  constexpr double kScale = 1.7;
  tc::HostTensor x(RandomValues(6, 21), {2, 3});
  tc::HostTensor w(RandomValues(6, 22), {2, 3});
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff(GetParam()));
  ASSERT_OK_AND_ASSIGN(tc::Tensor xt, session().Put(x, {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor wt, session().Put(w));
  // A recorded op on each side, so the plugin's node sits inside a graph.
  tc::TensorOr y = tc::Op1("example_scaled_square", {tc::Tanh(xt)}, {{"scale", kScale}});
  ASSERT_OK(y);
  EXPECT_TRUE(y->requires_grad());
  ASSERT_OK_AND_ASSIGN(tc::Tensor loss, tc::Sum(*y * wt));
  ASSERT_OK_AND_ASSIGN(double f0, SquareLoss(session(), x, w, kScale));
  EXPECT_NEAR(*loss.Item(), f0, 1e-12) << "recorded and plain forward agree";
  ASSERT_OK_AND_ASSIGN(tc::Gradients grads, ctx.Backward({loss}));
  std::vector<double> analytic = Doubles(grads.grad(xt));
  ASSERT_EQ(analytic.size(), 6u);

  constexpr double kEps = 1e-6;
  for (int64_t i = 0; i < 6; ++i) {
    tc::HostTensor plus = x, minus = x;
    plus.mutable_data<double>()[i] += kEps;
    minus.mutable_data<double>()[i] -= kEps;
    ASSERT_OK_AND_ASSIGN(double fp, SquareLoss(session(), plus, w, kScale));
    ASSERT_OK_AND_ASSIGN(double fm, SquareLoss(session(), minus, w, kScale));
    const double numeric = (fp - fm) / (2 * kEps);
    EXPECT_NEAR(analytic[i], numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpointing, PluginGradientTest,
                         ::testing::Values(tc::Checkpointing::kNone, tc::Checkpointing::kBalanced));

TEST_F(PluginTest, MultiOutputBackward) {
  // loss = sum(s * u) + sum(d * v) with (s, d) = (a + b, a - b): da = u + v, db = u - v.
  std::vector<double> av = RandomValues(4, 31), bv = RandomValues(4, 32);
  std::vector<double> uv = RandomValues(4, 33), vv = RandomValues(4, 34);
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, session().Put(tc::HostTensor(av, {4}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, session().Put(tc::HostTensor(bv, {4}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor u, session().Put(tc::HostTensor(uv, {4})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor v, session().Put(tc::HostTensor(vv, {4})));
  ASSERT_OK_AND_ASSIGN(std::vector<tc::Tensor> sd, session().Op("test_sum_diff", {a, b}));
  ASSERT_EQ(sd.size(), 2u);
  ASSERT_OK_AND_ASSIGN(tc::Tensor loss, tc::Sum(sd[0] * u) + tc::Sum(sd[1] * v));
  ASSERT_OK_AND_ASSIGN(tc::Gradients g, ctx.Backward({loss}, {}, /*retain_graph=*/true));
  std::vector<double> ga = Doubles(g.grad(a)), gb = Doubles(g.grad(b));
  ASSERT_EQ(ga.size(), 4u);
  ASSERT_EQ(gb.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(ga[i], uv[i] + vv[i], 1e-12) << i;
    EXPECT_NEAR(gb[i], uv[i] - vv[i], 1e-12) << i;
  }
  // Only the first output reaches the root: the second's gradient arrives as zeros.
  ASSERT_OK_AND_ASSIGN(tc::Tensor only_sum, tc::Sum(sd[0]));
  ASSERT_OK_AND_ASSIGN(tc::Gradients g1, ctx.Backward({only_sum}));
  EXPECT_THAT(Doubles(g1.grad(a)), ElementsAre(1, 1, 1, 1));
  EXPECT_THAT(Doubles(g1.grad(b)), ElementsAre(1, 1, 1, 1));
}

TEST_F(PluginTest, NonDifferentiableOpGivesPlainOutputs) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(
      tc::Tensor w, session().Put(tc::HostTensor(std::vector<float>{1, -2, 3}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor c, session().Op1("test_count", {w}, {{"threshold", 0.0}}));
  EXPECT_FALSE(c.requires_grad());
  EXPECT_THAT(c.ToVector<int64_t>().value(), ElementsAre(2));
}

class UnmarkedPluginOpTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    absl::StatusOr<tc::AutodiffContext> ctx = session().OpenAutodiff();
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    ctx_ = std::make_unique<tc::AutodiffContext>(std::move(*ctx));
    ASSERT_OK_AND_ASSIGN(
        w_, session().Put(tc::HostTensor(std::vector<float>{3, 4}), {true, ctx_->id()}));
    // Something on the tape, so "the tape is unchanged" means something.
    ASSERT_OK_AND_ASSIGN(y_, w_ * 2.0);
  }

  std::map<std::string, std::string> Expected(const tc::Tensor& t) {
    return {{"op", "example_clip_norm"},
            {"plugin", kExampleOrigin},
            {"input_index", "0"},
            {"tensor_id", absl::StrCat(t.handle())},
            {"context_id", absl::StrCat(ctx_->id())}};
  }

  void ExpectSessionWorks() {
    ASSERT_OK_AND_ASSIGN(tc::Tensor loss, tc::Sum(tc::Op1("example_scaled_square", {w_})));
    ASSERT_OK_AND_ASSIGN(tc::Gradients g, ctx_->Backward({loss}));
    EXPECT_THAT(Floats(g.grad(w_)), ElementsAre(6, 8));
  }

  std::unique_ptr<tc::AutodiffContext> ctx_;
  tc::Tensor w_, y_;
};

TEST_F(UnmarkedPluginOpTest, EagerCallFailsAndChangesNothing) {
  tc::SessionInfo before = Snapshot();
  absl::StatusOr<tc::Tensor> r = session().Op1("example_clip_norm", {w_});
  EXPECT_TRUE(FailsWith(Status(r), absl::StatusCode::kFailedPrecondition,
                        v1::OPERATION_NOT_MARKED_FOR_AUTODIFF, Expected(w_)));
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("'example_clip_norm' (plugin libtensord_example_ops.so) is not marked"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("detach"));
  absl::StatusOr<tc::SessionInfo> after = session().Info();
  ASSERT_OK(after);
  EXPECT_EQ(*after, before);
  ExpectSessionWorks();
}

TEST_F(UnmarkedPluginOpTest, RecordedOutputInBatchRollsBack) {
  tc::SessionInfo before = Snapshot();
  tc::Batch batch = session().NewBatch();
  tc::CallRef squared = batch.Add("example_scaled_square", {y_});
  batch.Add("example_clip_norm", {squared});
  absl::StatusOr<tc::BatchResult> r = batch.Run();
  std::map<std::string, std::string> md = {{"op", "example_clip_norm"},
                                           {"plugin", kExampleOrigin},
                                           {"call_index", "1"},
                                           {"input_index", "0"},
                                           {"context_id", absl::StrCat(ctx_->id())}};
  EXPECT_TRUE(FailsWith(Status(r), absl::StatusCode::kFailedPrecondition,
                        v1::OPERATION_NOT_MARKED_FOR_AUTODIFF, md));
  absl::StatusOr<tc::SessionInfo> after = session().Info();
  ASSERT_OK(after);
  EXPECT_EQ(*after, before) << "call 0 recorded onto the tape and stored an output; all gone";
  ExpectSessionWorks();
}

TEST_F(UnmarkedPluginOpTest, DetachOrNoGradIsTheWayOut) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor detached, session().Op1("detach", {w_}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, session().Op1("example_clip_norm", {detached}));
  EXPECT_FALSE(a.requires_grad());
  tc::NoGradGuard guard = session().NoGrad();
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, session().Op1("example_clip_norm", {w_}));
  EXPECT_FALSE(b.requires_grad());
  EXPECT_EQ(Floats(a), Floats(b));
  EXPECT_THAT(Floats(b),
              ElementsAre(::testing::FloatNear(0.6f, 1e-6f), ::testing::FloatNear(0.8f, 1e-6f)));
}

// Below the client: bf16/f16 operands, which the plugin ABI has no dtype for, are computed in
// f32 by the dispatcher (the plugin sees f32) and stored back in their dtype; gradients reach a
// bf16 leaf as bf16.
TEST(PluginDispatchTest, LowPrecisionOperandsAreComputedInF32) {
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const OpRegistry> registry,
                       plugins::RegistryWithPlugins(OpRegistry::Builtin(), {kExample}));
  Dispatcher dispatcher(*registry, MakeBackends());
  AutodiffContext ctx(1, Checkpointing::kNone);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  auto call = [&](const std::string& op, std::vector<Tensor> inputs, AttrMap attrs) {
    absl::StatusOr<std::vector<Tensor>> out = dispatcher.Call(op, std::move(inputs), attrs, env);
    EXPECT_TRUE(out.ok()) << op << ": " << out.status();
    return out.ok() ? out->at(0) : Tensor();
  };
  auto cast = [&](const Tensor& t, DType dtype) {
    return call("to_dtype", {t}, {{"dtype", std::string(DTypeName(dtype))}});
  };
  const Tensor x = Tensor::FromVector<float>({1.5f, -2.0f, 3.0f}, {3});
  for (DType low : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(low));
    Tensor y = call("example_scaled_square", {cast(x, low)}, {{"scale", 2.0}});
    ASSERT_TRUE(y.defined());
    EXPECT_EQ(y.dtype(), low);
    EXPECT_THAT(cast(y, DType::kF32).ToDoubles(), ElementsAre(4.5, 8, 18));
  }

  Tensor leaf = cast(x, DType::kBF16);
  leaf.set_autograd(MakeLeafMeta(1, 7));
  Tensor loss = call("sum", {call("example_scaled_square", {leaf}, {})}, {});
  ASSERT_TRUE(loss.defined());
  absl::StatusOr<std::vector<LeafGradient>> grads =
      dispatcher.Backward(ctx, {loss}, {}, /*retain_graph=*/false, env);
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(grads->size(), 1u);
  EXPECT_EQ(grads->at(0).grad.dtype(), DType::kBF16);
  EXPECT_THAT(cast(grads->at(0).grad, DType::kF32).ToDoubles(), ElementsAre(3, -4, 6));
}

// ---- refused at start -------------------------------------------------------------------------

// Start with `plugins` fails with INVALID_ARGUMENT and a one-line message naming `named`.
::testing::AssertionResult Refused(const std::vector<std::string>& plugins,
                                   const std::string& named, const std::string& problem) {
  ServerOptions options = TestServerOptions();
  options.plugins = plugins;
  absl::StatusOr<std::unique_ptr<TensordServer>> server = TensordServer::Start(options);
  if (server.ok()) return ::testing::AssertionFailure() << "the server started";
  const std::string message(server.status().message());
  if (server.status().code() != absl::StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << "code " << server.status();
  }
  if (message.find('\n') != std::string::npos) {
    return ::testing::AssertionFailure() << "not one line: " << message;
  }
  if (message.rfind(absl::StrCat("plugin ", named, ": "), 0) != 0) {
    return ::testing::AssertionFailure() << "does not start by naming " << named << ": " << message;
  }
  if (message.find(problem) == std::string::npos) {
    return ::testing::AssertionFailure() << "does not say '" << problem << "': " << message;
  }
  return ::testing::AssertionSuccess() << message;
}

TEST(PluginStartTest, BadPluginsAreRefusedWithAClearMessage) {
  const std::string abi = Broken("abi_version");
  EXPECT_TRUE(Refused({abi}, abi,
                      "built for plugin ABI version 99, but this server speaks version 1; "
                      "rebuild it against this server's include/tensord/plugin.h"));
  const std::string builtin = Broken("clash_builtin");
  EXPECT_TRUE(Refused({builtin}, builtin, "op 'relu' clashes with the built-in op of that name"));
  const std::string example_clash = Broken("clash_example");
  EXPECT_TRUE(Refused({kExample, example_clash}, example_clash,
                      "op 'example_clip_norm' clashes with the op of that name of plugin "
                      "libtensord_example_ops.so"));
  const std::string malformed = Broken("malformed");
  EXPECT_TRUE(Refused({malformed}, malformed,
                      "op 'broken_malformed_copy': has a backward kernel and is marked "
                      "non-differentiable"));
  const std::string init = Broken("init_fails");
  EXPECT_TRUE(Refused({init}, init,
                      "tensord_plugin_init failed with status code 6: no licence for the copy op"));
  const std::string no_init = Broken("no_init");
  EXPECT_TRUE(Refused({no_init}, no_init, "exports no tensord_plugin_init()"));
  EXPECT_TRUE(Refused({"/nonexistent/libops.so"}, "/nonexistent/libops.so",
                      "cannot open: No such file or directory"));
  EXPECT_TRUE(Refused({kExample, kExample}, kExample, "given twice"));
  // Not a shared library at all.
  const std::string header = tensord::testing::SourcePath("include/tensord/plugin.h");
  EXPECT_TRUE(Refused({header}, header, "cannot load: "));
}

TEST(PluginStartTest, RefusalsLeaveNothingBehind) {
  EXPECT_TRUE(Refused({kTestOps, Broken("clash_builtin")}, Broken("clash_builtin"), "relu"));
  // A good plugin loaded alongside a refused one is not served by a later server without it.
  std::unique_ptr<ServerAndClient> plain = StartServer(TestServerOptions());
  ASSERT_NE(plain, nullptr);
  ASSERT_OK_AND_ASSIGN(std::vector<tc::OpInfo> ops, plain->client->Ops());
  for (const tc::OpInfo& op : ops) {
    EXPECT_EQ(op.origin(), "builtin") << op.name();
    EXPECT_THAT(op.name(), Not(HasSubstr("broken")));
  }
  ASSERT_OK_AND_ASSIGN(tc::Session s, plain->client->CreateSession());
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, s.Put(tc::HostTensor(std::vector<float>{1})));
  EXPECT_TRUE(FailsWith(Status(s.Op1("test_count", {x}, {{"threshold", 0.0}})),
                        absl::StatusCode::kInvalidArgument, v1::UNKNOWN_OP));

  // Two servers of one process may load the same plugin; each serves it.
  ServerOptions options = TestServerOptions();
  options.plugins = {kTestOps};
  std::unique_ptr<ServerAndClient> first = StartServer(options);
  std::unique_ptr<ServerAndClient> second = StartServer(options);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  for (ServerAndClient* env : {first.get(), second.get()}) {
    ASSERT_OK_AND_ASSIGN(tc::Session session, env->client->CreateSession());
    ASSERT_OK_AND_ASSIGN(tc::Tensor v, session.Put(tc::HostTensor(std::vector<float>{1, 2})));
    ASSERT_OK_AND_ASSIGN(tc::Tensor c, session.Op1("test_count", {v}, {{"threshold", 1.5}}));
    EXPECT_THAT(c.ToVector<int64_t>().value(), ElementsAre(1));
  }
}

}  // namespace
}  // namespace tensord::service_test
