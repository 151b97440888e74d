// Programs (CompileProgram / RunProgram / ReleaseProgram) through the C++ client's builder:
// a training step compiled once equals the same step run eagerly, bit for bit in f64; the
// two autodiff failures are typed at compile and at run time; a failing run changes nothing;
// programs belong to their session.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/backends/cpu/onednn_common.h"
#include "server/core/host_memory.h"
#include "server/core/status.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr absl::StatusCode kFailedPrecondition = absl::StatusCode::kFailedPrecondition;
constexpr absl::StatusCode kInvalidArgument = absl::StatusCode::kInvalidArgument;

std::string Id(uint64_t v) { return absl::StrCat(v); }

// Deterministic values in [-1, 1).
std::vector<double> Values(size_t n, int seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 37 + seed * 11) % 64) / 32 - 1;
  return v;
}

class ProgramTest : public ServiceTest {
 protected:
  // A 4-5-1 tanh MLP, its weights requires-grad leaves of `ctx`.
  struct Mlp {
    tc::Tensor w1, b1, w2;
  };
  absl::StatusOr<Mlp> MakeMlp(const tc::AutodiffContext& ctx) {
    Mlp m;
    tc::PutOptions leaf{true, ctx.id()};
    auto w1 = session().Put(tc::HostTensor(Values(20, 1), {4, 5}), leaf);
    auto b1 = session().Put(tc::HostTensor(Values(5, 2), {5}), leaf);
    auto w2 = session().Put(tc::HostTensor(Values(5, 3), {5, 1}), leaf);
    if (!w1.ok()) return w1.status();
    if (!b1.ok()) return b1.status();
    if (!w2.ok()) return w2.status();
    m.w1 = *w1;
    m.b1 = *b1;
    m.w2 = *w2;
    return m;
  }
  static tc::HostTensor X(int seed) { return tc::HostTensor(Values(32, seed), {8, 4}); }
  static tc::HostTensor Y(int seed) { return tc::HostTensor(Values(8, seed + 5), {8, 1}); }

  // loss = mse(tanh(x w1 + b1) w2, y) as program calls; returns the loss call.
  static tc::CallRef AddForward(tc::ProgramBuilder& b, const Mlp& m, const tc::Operand& x,
                                const tc::Operand& y) {
    tc::CallRef h = b.Add("tanh", {b.Add("add", {b.Add("matmul", {x, m.w1}), m.b1})});
    return b.Add("mse_loss", {b.Add("matmul", {h, m.w2}), y}, {}, {/*fetch=*/true});
  }

  // The MLP's training step as a program: x and y its parameters, the backward to m's
  // weights, then `opt`'s update.
  struct CompiledStep {
    tc::Program program;
    tc::CallRef loss;
  };
  absl::StatusOr<CompiledStep> CompileStep(const tc::AutodiffContext& ctx, const Mlp& m,
                                           tc::Adam& opt) {
    tc::ProgramBuilder b = session().NewProgram(ctx.id());
    tc::Operand x = b.Parameter(X(0), "x");
    tc::Operand y = b.Parameter(Y(0), "y");
    tc::CallRef loss = AddForward(b, m, x, y);
    b.Backward({loss.out(0)}, {m.w1, m.b1, m.w2});
    RETURN_IF_ERROR(opt.AddStepTo(b));
    ASSIGN_OR_RETURN(tc::Program program, b.Compile());
    return CompiledStep{std::move(program), loss};
  }
  // One eager training step of `m` on batch `s` with `opt`; returns its loss.
  static absl::StatusOr<tc::Tensor> EagerStep(tc::AutodiffContext& ctx, const Mlp& m, tc::Adam& opt,
                                              int s) {
    ASSIGN_OR_RETURN(tc::Tensor l,
                     tc::MseLoss(tc::Matmul(tc::Tanh(tc::Matmul(X(s), m.w1) + m.b1), m.w2), Y(s)));
    ASSIGN_OR_RETURN(tc::Gradients g, ctx.Backward({l}));
    RETURN_IF_ERROR(opt.Step(g));
    return l;
  }
  // The step's loss and the two MLPs' parameters are the same bits.
  static void ExpectSameStep(const tc::ProgramResult& r, const tc::CallRef& loss,
                             const tc::Tensor& eager_loss, const Mlp& compiled, const Mlp& eager,
                             int s) {
    EXPECT_EQ(r.value(loss).ToDoubles(), Doubles(eager_loss)) << "step " << s;
    EXPECT_EQ(Doubles(compiled.w1), Doubles(eager.w1)) << "step " << s;
    EXPECT_EQ(Doubles(compiled.b1), Doubles(eager.b1)) << "step " << s;
    EXPECT_EQ(Doubles(compiled.w2), Doubles(eager.w2)) << "step " << s;
  }
};

TEST_F(ProgramTest, AdamTrainingStepEqualsTheEagerStepBitForBitInF64) {
  REQUIRE_OPS("matmul", "add", "tanh", "mse_loss", "adam");
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(Mlp eager, MakeMlp(ctx));
  ASSERT_OK_AND_ASSIGN(Mlp compiled, MakeMlp(ctx));
  tc::AdamOptions options;
  options.lr = 0.05;
  tc::Adam eager_opt({eager.w1, eager.b1, eager.w2}, options);
  tc::Adam program_opt({compiled.w1, compiled.b1, compiled.w2}, options);

  ASSERT_OK_AND_ASSIGN(CompiledStep made, CompileStep(ctx, compiled, program_opt));
  const tc::Program& step = made.program;
  const tc::CallRef& loss = made.loss;
  ASSERT_EQ(step.compiled(loss).size(), 1u);
  EXPECT_EQ(step.compiled(loss)[0].dtype, tc::DType::kF64);
  EXPECT_TRUE(step.compiled(loss)[0].shape.empty()) << "the loss is 0-d";
  EXPECT_THAT(Doubles(compiled.w1), ElementsAreArray(Values(20, 1)))
      << "compiling ran the step once and undid it";

  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, session().Info());
  for (int s = 1; s <= 3; ++s) {
    ASSERT_OK_AND_ASSIGN(tc::Tensor l, EagerStep(ctx, eager, eager_opt, s));
    ASSERT_OK_AND_ASSIGN(tc::ProgramResult r, step.Run({X(s), Y(s)}));
    ExpectSameStep(r, loss, l, compiled, eager, s);
  }
  EXPECT_EQ(Doubles(program_opt.state(compiled.w1)[2]), std::vector<double>{3})
      << "the step counter counted the three runs, not the compile";
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, session().Info());
  const tc::ContextInfo* c = after.context(ctx.id());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->tape_nodes, before.context(ctx.id())->tape_nodes)
      << "every run freed the graph it recorded";
}

// The compiled runs record into the program's own nodes, not on the tape. A run whose input is
// an autodiff tensor records another graph: it goes on on the tape and walks that graph, and
// the run after it takes the plan again. Every step equals the eager step bit for bit.
TEST_F(ProgramTest, ARunThatRecordsAnotherGraphWalksItAndTheNextTakesThePlanAgain) {
  REQUIRE_OPS("matmul", "add", "tanh", "mse_loss", "adam");
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(Mlp eager, MakeMlp(ctx));
  ASSERT_OK_AND_ASSIGN(Mlp compiled, MakeMlp(ctx));
  tc::Adam eager_opt({eager.w1, eager.b1, eager.w2}, tc::AdamOptions{});
  tc::Adam program_opt({compiled.w1, compiled.b1, compiled.w2}, tc::AdamOptions{});
  ASSERT_OK_AND_ASSIGN(CompiledStep made, CompileStep(ctx, compiled, program_opt));
  const tc::Program& step = made.program;
  const tc::CallRef& loss = made.loss;
  for (int s = 1; s <= 4; ++s) {
    ASSERT_OK_AND_ASSIGN(tc::Tensor l, EagerStep(ctx, eager, eager_opt, s));
    tc::Operand input = X(s);
    if (s == 2 || s == 3) {  // a requires-grad leaf of the context
      ASSERT_OK_AND_ASSIGN(tc::Tensor tracked, session().Put(X(s), {true, ctx.id()}));
      input = tracked;
    }
    ASSERT_OK_AND_ASSIGN(tc::ProgramResult r, step.Run({input, Y(s)}));
    ExpectSameStep(r, loss, l, compiled, eager, s);
    ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, session().Info());
    EXPECT_EQ(info.context(ctx.id())->tape_nodes, 0u) << "step " << s << " freed its graph";
  }
}

TEST_F(ProgramTest, FetchedGradientsAndKeptOutputs) {
  REQUIRE_OPS("mul", "sum");
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(
      tc::Tensor w, session().Put(tc::HostTensor(std::vector<double>{1, 2, 3}), {true, ctx.id()}));
  tc::ProgramBuilder b = session().NewProgram(ctx.id());
  tc::Operand c = b.Parameter(tc::HostTensor(std::vector<double>{0, 0, 0}), "c");
  tc::CallRef prod = b.Add("mul", {w, c}, {}, {/*fetch=*/false, /*keep=*/true});
  tc::CallRef loss = b.Add("sum", {prod});
  b.Backward({loss.out(0)}, {w}, /*fetch_gradients=*/true);
  ASSERT_OK_AND_ASSIGN(tc::Program p, b.Compile());
  ASSERT_OK_AND_ASSIGN(tc::ProgramResult r, p.Run({tc::HostTensor(std::vector<double>{4, -5, 6})}));
  ASSERT_EQ(r.gradients().size(), 1u);
  EXPECT_THAT(r.gradients()[0].ToDoubles(), ElementsAre(4, -5, 6)) << "d sum(w*c)/dw = c";
  ASSERT_EQ(r.outputs(prod).size(), 1u);
  EXPECT_THAT(Doubles(r.output(prod)), ElementsAre(4, -10, 18));
  EXPECT_FALSE(r.output(prod).info().requires_grad) << "a run with backward keeps plain tensors";
  EXPECT_TRUE(r.outputs(loss).empty()) << "neither kept nor fetched";
}

// linear -> add -> relu in f32 runs as one fused op: the client sees which calls it absorbed,
// and the result is the unfused arithmetic's (every product here is exact in f32).
TEST_F(ProgramTest, RunsAfterTheFirstFindTheirPrimitivesAndBuffersAgain) {
  REQUIRE_OPS("matmul", "add", "tanh", "mse_loss", "adam");
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  auto f32 = [](size_t n, int seed, tc::Shape shape) {
    std::vector<float> v;
    for (double x : Values(n, seed)) v.push_back(static_cast<float>(x) / 8);
    return tc::HostTensor(v, std::move(shape));
  };
  // A batch of 256: the input and the hidden layer (64 and 128 KiB) come from the host pool.
  tc::PutOptions leaf{true, ctx.id()};
  Mlp m;
  ASSERT_OK_AND_ASSIGN(m.w1, session().Put(f32(64 * 128, 1, {64, 128}), leaf));
  ASSERT_OK_AND_ASSIGN(m.b1, session().Put(f32(128, 2, {128}), leaf));
  ASSERT_OK_AND_ASSIGN(m.w2, session().Put(f32(128, 3, {128, 1}), leaf));
  tc::Adam opt({m.w1, m.b1, m.w2}, tc::AdamOptions{});
  tc::ProgramBuilder b = session().NewProgram(ctx.id());
  tc::Operand x = b.Parameter(f32(256 * 64, 0, {256, 64}), "x");
  tc::Operand y = b.Parameter(f32(256, 5, {256, 1}), "y");
  tc::CallRef loss = AddForward(b, m, x, y);
  b.Backward({loss.out(0)}, {m.w1, m.b1, m.w2});
  ASSERT_OK(opt.AddStepTo(b));
  ASSERT_OK_AND_ASSIGN(tc::Program step, b.Compile());
  auto lookups = [] {
    const cpu::onednn::CacheStats s = cpu::onednn::GetCacheStats();
    return s.hits + s.misses;
  };
  ASSERT_OK(step.Run({f32(256 * 64, 7, {256, 64}), f32(256, 8, {256, 1})}).status());
  const int64_t after_first = lookups();
  const size_t maps = host_memory::GetStats().maps;
  const size_t reuses = host_memory::GetStats().reuses;
  for (int run = 0; run < 2; ++run) {
    ASSERT_OK(step.Run({f32(256 * 64, 9 + run, {256, 64}), f32(256, run, {256, 1})}).status());
  }
  // The forward's products, the backward's (by op name) and the updates: each call's plan
  // holds its primitives (CallPlan, CallSequence, KernelMemo).
  EXPECT_EQ(lookups(), after_first);
  // Each run's large buffers are blocks the run before freed: no fresh pages.
  if (host_memory::Pooled()) {
    EXPECT_EQ(host_memory::GetStats().maps, maps);
    EXPECT_GT(host_memory::GetStats().reuses, reuses);
  }
}

TEST_F(ProgramTest, ALinearBiasAndReluRunAsOneFusedOp) {
  REQUIRE_OPS("linear", "add", "relu");
  tc::ProgramBuilder b = session().NewProgram();
  tc::Operand x = b.Parameter(tc::HostTensor(std::vector<float>{1, -2, 3, 4, 0, -1}, {2, 3}), "x");
  tc::Operand w = b.Parameter(tc::HostTensor(std::vector<float>{1, 1, 1, -1, 0, 2}, {2, 3}), "w");
  tc::Operand bias = b.Parameter(tc::HostTensor(std::vector<float>{0.5f, -3}, {2}), "b");
  tc::CallRef product = b.Add("linear", {x, w});
  tc::CallRef added = b.Add("add", {product.out(0), bias});
  tc::CallRef relu = b.Add("relu", {added.out(0)}, {}, {/*fetch=*/true});
  ASSERT_OK_AND_ASSIGN(tc::Program p, b.Compile());
  EXPECT_EQ(p.fused_calls(), 1);
  EXPECT_EQ(p.fused_op(product), "fused_linear");
  EXPECT_EQ(p.fused_op(added), "fused_linear");
  EXPECT_EQ(p.fused_op(relu), "fused_linear");
  EXPECT_THAT(p.compiled(product), ::testing::SizeIs(1)) << "its compiled type stays listed";
  ASSERT_OK_AND_ASSIGN(tc::ProgramResult r,
                       p.Run({tc::HostTensor(std::vector<float>{1, -2, 3, 4, 0, -1}, {2, 3}),
                              tc::HostTensor(std::vector<float>{1, 1, 1, -1, 0, 2}, {2, 3}),
                              tc::HostTensor(std::vector<float>{0.5f, -3}, {2})}));
  // rows [2, 5] and [3, -6], plus the bias [0.5, -3], then relu.
  EXPECT_THAT(r.value(relu).ToDoubles(), ElementsAre(2.5, 2, 3.5, 0));
  EXPECT_TRUE(r.outputs(product).empty()) << "a folded call has no output";
}

// x * w + 0.5, then relu: one fused_elementwise call, computing what the calls compute.
TEST_F(ProgramTest, APointwiseTreeRunsAsOneFusedElementwiseCall) {
  REQUIRE_OPS("mul", "add", "relu");
  const tc::HostTensor xv(std::vector<float>{1, -2, 3, 0.25f}, {2, 2});
  const tc::HostTensor wv(std::vector<float>{2, 1}, {2});
  tc::ProgramBuilder b = session().NewProgram();
  tc::CallRef product = b.Add("mul", {b.Parameter(xv, "x"), b.Parameter(wv, "w")});
  tc::CallRef added = b.Add("add", {product.out(0), 0.5});
  tc::CallRef relu = b.Add("relu", {added.out(0)}, {}, {/*fetch=*/true});
  ASSERT_OK_AND_ASSIGN(tc::Program p, b.Compile());
  EXPECT_EQ(p.fused_calls(), 1);
  for (const tc::CallRef& c : {product, added, relu}) {
    EXPECT_EQ(p.fused_op(c), "fused_elementwise");
  }
  ASSERT_OK_AND_ASSIGN(tc::ProgramResult r, p.Run({xv, wv}));
  // [2, -2, 6, 0.25] + 0.5, then relu.
  EXPECT_THAT(r.value(relu).ToDoubles(), ElementsAre(2.5, 0, 6.5, 0.75));
  EXPECT_TRUE(r.outputs(added).empty()) << "a folded call has no output";
}

// A run drops each intermediate after its last reader: a chain of eight 1 MiB calls holds
// about two of them at a time, and the program reports that peak. (Scans: a chain of pointwise
// calls would fuse into one call.)
TEST_F(ProgramTest, AChainDropsItsIntermediatesAndReportsItsPeak) {
  REQUIRE_OPS("cumsum", "mul");
  constexpr int64_t kN = 1 << 18;  // f32: 1 MiB per tensor
  constexpr int64_t kBytes = kN * 4;
  std::vector<float> e0(kN, 0.0f);
  e0[0] = 1;
  const tc::HostTensor xv(e0, {kN});
  int64_t peaks[2] = {0, 0};
  for (int length : {2, 8}) {
    tc::ProgramBuilder b = session().NewProgram(0, /*no_grad=*/true);
    tc::CallRef last = b.Add("cumsum", {b.Parameter(xv, "x")}, {{"dim", int64_t{0}}});
    for (int k = 1; k < length; ++k) {
      // e0, ones, zeros, zeros, ...: every call makes a new 1 MiB tensor.
      last = k % 2 ? b.Add("mul", {last.out(0), 0.0})
                   : b.Add("cumsum", {last.out(0)}, {{"dim", int64_t{0}}});
    }
    tc::CallRef out = b.Add("mul", {last.out(0), 0.5}, {}, {/*fetch=*/true});
    ASSERT_OK_AND_ASSIGN(tc::Program p, b.Compile());
    peaks[length == 8] = p.peak_bytes();
    ASSERT_OK_AND_ASSIGN(tc::ProgramResult r, p.Run({xv}));
    EXPECT_EQ(r.value(out).ToDoubles()[kN - 1], 0.0) << length;
  }
  EXPECT_GE(peaks[0], kBytes) << "at least one intermediate is held";
  EXPECT_LE(peaks[1], 3 * kBytes) << "eight calls, but never more than two live intermediates";
  EXPECT_LE(peaks[1], peaks[0] + 4096) << "the peak does not grow with the chain";
}

TEST_F(ProgramTest, UnmarkedUseOnTheDifferentiatedPathFailsAtCompileNamingTheCall) {
  REQUIRE_OPS("relu", "assign", "sum");
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor w,
                       session().Put(tc::HostTensor(std::vector<float>{1, -2}), {true, ctx.id()}));
  tc::ProgramBuilder b = session().NewProgram(ctx.id());
  tc::CallRef h = b.Add("relu", {w});
  b.Add("assign", {h, 0.0});  // an in-place write into a recorded output
  tc::CallRef loss = b.Add("sum", {h});
  b.Backward({loss.out(0)}, {w});
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, session().Info());
  absl::StatusOr<tc::Program> p = b.Compile();
  EXPECT_TRUE(FailsWith(
      Status(p), kFailedPrecondition, v1::OPERATION_NOT_MARKED_FOR_AUTODIFF,
      {{"op", "assign"}, {"call_index", "1"}, {"phase", "forward"}, {"context_id", Id(ctx.id())}}));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, session().Info());
  EXPECT_EQ(after, before) << "a failed compile leaves the session as it was";
}

TEST_F(ProgramTest, RunInAClosedContextIsAutodiffContextNotEnabled) {
  REQUIRE_OPS("mul", "sum", "sgd");
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor w,
                       session().Put(tc::HostTensor(std::vector<float>{1, 2}), {true, ctx.id()}));
  tc::ProgramBuilder b = session().NewProgram(ctx.id());
  tc::CallRef loss = b.Add("sum", {b.Add("mul", {w, w})});
  b.Backward({loss.out(0)}, {w});
  b.Update("sgd", {w, tc::Operand::GradientOf(w.handle())}, {{"lr", 0.5}});
  ASSERT_OK_AND_ASSIGN(tc::Program p, b.Compile());
  ASSERT_OK(p.Run({}));
  EXPECT_THAT(Floats(w), ElementsAre(0, 0)) << "w - 0.5 * 2w";
  ASSERT_OK(ctx.Close());
  absl::StatusOr<tc::ProgramResult> r = p.Run({});
  EXPECT_TRUE(FailsWith(
      Status(r), kFailedPrecondition, v1::AUTODIFF_CONTEXT_NOT_ENABLED,
      {{"context_id", Id(ctx.id())}, {"context_state", "closed"}, {"program_id", Id(p.id())}}));
  // Compiling in a closed context fails the same way.
  tc::ProgramBuilder again = session().NewProgram(ctx.id());
  again.Add("sum", {w});
  EXPECT_TRUE(FailsWith(Status(again.Compile()), kFailedPrecondition,
                        v1::AUTODIFF_CONTEXT_NOT_ENABLED, {{"context_state", "closed"}}));
}

TEST_F(ProgramTest, AFailingUpdateRollsTheWholeRunBack) {
  REQUIRE_OPS("mul", "sum", "sgd", "index_select");
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(
      tc::Tensor w, session().Put(tc::HostTensor(std::vector<float>{1, 2, 3}), {true, ctx.id()}));
  tc::ProgramBuilder b = session().NewProgram(ctx.id());
  tc::Operand idx = b.Parameter(tc::HostTensor(std::vector<int64_t>{0}), "idx");
  tc::CallRef loss = b.Add("sum", {b.Add("mul", {w, w})});
  b.Backward({loss.out(0)}, {w});
  b.Update("sgd", {w, tc::Operand::GradientOf(w.handle())}, {{"lr", 0.25}});
  // Reads the updated weights at an index the run binds: out of range fails after the write.
  tc::CallRef picked = b.Update("index_select", {w, idx}, {{"dim", 0}}, {/*fetch=*/true});
  ASSERT_OK_AND_ASSIGN(tc::Program p, b.Compile());
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, session().Info());
  absl::StatusOr<tc::ProgramResult> bad = p.Run({tc::HostTensor(std::vector<int64_t>{7})});
  EXPECT_TRUE(FailsWith(Status(bad), absl::StatusCode::kOutOfRange, v1::INDEX_OUT_OF_RANGE,
                        {{"call_index", "3"}, {"phase", "update"}, {"op", "index_select"}}));
  EXPECT_THAT(Floats(w), ElementsAre(1, 2, 3)) << "the sgd write was undone";
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, session().Info());
  EXPECT_EQ(after, before);
  ASSERT_OK_AND_ASSIGN(tc::ProgramResult ok, p.Run({tc::HostTensor(std::vector<int64_t>{2})}));
  EXPECT_THAT(ok.value(picked).ToDoubles(), ElementsAre(1.5)) << "3 - 0.25 * 6";
}

TEST_F(ProgramTest, InputsAreCheckedAgainstTheCompiledTypes) {
  REQUIRE_OPS("mul");
  tc::ProgramBuilder b = session().NewProgram();
  tc::Operand x = b.Parameter(tc::HostTensor(std::vector<float>{1, 2}), "x");
  tc::Operand k = b.Parameter(2.0, "k");
  tc::CallRef out = b.Add("mul", {x, k}, {}, {/*fetch=*/true});
  ASSERT_OK_AND_ASSIGN(tc::Program p, b.Compile());
  ASSERT_OK_AND_ASSIGN(tc::ProgramResult r, p.Run({tc::HostTensor(std::vector<float>{3, 4}), 0.5}));
  EXPECT_THAT(r.value(out).ToDoubles(), ElementsAre(1.5, 2));
  EXPECT_TRUE(FailsWith(Status(p.Run({tc::HostTensor(std::vector<float>{1, 2, 3}), 0.5})),
                        kInvalidArgument, v1::SHAPE_MISMATCH,
                        {{"parameter_index", "0"}, {"parameter", "x"}, {"expected", "[2]"}}));
  EXPECT_TRUE(FailsWith(Status(p.Run({tc::HostTensor(std::vector<double>{1, 2}), 0.5})),
                        kInvalidArgument, v1::DTYPE_MISMATCH,
                        {{"parameter_index", "0"}, {"expected", "f32"}, {"got", "f64"}}));
  EXPECT_TRUE(FailsWith(Status(p.Run({tc::HostTensor(std::vector<float>{1, 2}), int64_t{3}})),
                        kInvalidArgument, v1::DTYPE_MISMATCH, {{"parameter", "k"}}));
  EXPECT_TRUE(FailsWith(Status(p.Run({0.5, 0.5})), kInvalidArgument, v1::BAD_OPERAND,
                        {{"parameter_index", "0"}}));
  EXPECT_TRUE(FailsWith(Status(p.Run({tc::HostTensor(std::vector<float>{1, 2})})), kInvalidArgument,
                        v1::INVALID_REQUEST,
                        {{"field", "inputs"}, {"expected", "2"}, {"got", "1"}}));
}

TEST_F(ProgramTest, ProgramsBelongToTheirSession) {
  REQUIRE_OPS("neg");
  tc::ProgramBuilder b = session().NewProgram();
  b.Add("neg", {b.Parameter(1.0)}, {}, {/*fetch=*/true});
  ASSERT_OK_AND_ASSIGN(tc::Program p, b.Compile());
  ASSERT_OK(p.Run({2.0}));

  auto stub = RawStub();
  v1::GetSessionInfoRequest info_req;
  info_req.set_session_id(session().id());
  v1::GetSessionInfoResponse info;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->GetSessionInfo(&context, info_req, &info).ok());
  }
  ASSERT_EQ(info.programs_size(), 1);
  EXPECT_EQ(info.programs(0).program_id(), p.id());
  EXPECT_EQ(info.programs(0).parameters(), 1u);
  EXPECT_EQ(info.programs(0).calls(), 1u);
  EXPECT_EQ(info.programs(0).runs(), 1u);

  ASSERT_OK_AND_ASSIGN(tc::Session other, client().CreateSession());
  v1::RunProgramRequest run;
  run.set_session_id(other.id());
  run.set_program_id(p.id());
  run.add_inputs()->mutable_scalar()->set_f(1.0);
  v1::RunProgramResponse resp;
  grpc::ClientContext context;
  EXPECT_TRUE(FailsWith(tc::FromGrpcStatus(stub->RunProgram(&context, run, &resp)),
                        absl::StatusCode::kNotFound, v1::PROGRAM_NOT_FOUND,
                        {{"program_id", Id(p.id())}}));

  ASSERT_OK(p.Release());
  EXPECT_TRUE(FailsWith(Status(p.Run({2.0})), absl::StatusCode::kNotFound, v1::PROGRAM_NOT_FOUND,
                        {{"program_id", Id(p.id())}}));
  EXPECT_TRUE(FailsWith(p.Release(), absl::StatusCode::kNotFound, v1::PROGRAM_NOT_FOUND));
}

TEST_F(ProgramTest, ProgramOperandsOutsideProgramsAreBadOperands) {
  REQUIRE_OPS("neg");
  tc::Batch batch = session().NewBatch();
  batch.Add("neg", {tc::Operand::Parameter(0)});
  EXPECT_TRUE(FailsWith(Status(batch.Run()), kInvalidArgument, v1::BAD_OPERAND,
                        {{"call_index", "0"}, {"input_index", "0"}}));
  // A gradient in the forward, and a parameter index past the end.
  tc::ProgramBuilder b = session().NewProgram();
  b.Add("neg", {tc::Operand::GradientOf(1)});
  EXPECT_TRUE(FailsWith(Status(b.Compile()), kInvalidArgument, v1::BAD_OPERAND,
                        {{"call_index", "0"}, {"phase", "forward"}}));
  tc::ProgramBuilder c = session().NewProgram();
  c.Add("neg", {tc::Operand::Parameter(3)});
  EXPECT_TRUE(FailsWith(Status(c.Compile()), kInvalidArgument, v1::BAD_OPERAND,
                        {{"parameter_index", "3"}}));
}

TEST_F(ProgramTest, ABackwardNeedsAContextAndReachableLeaves) {
  REQUIRE_OPS("mul", "sum");
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor w,
                       session().Put(tc::HostTensor(std::vector<float>{1, 2}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor unused,
                       session().Put(tc::HostTensor(std::vector<float>{1}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor plain, session().Put(tc::HostTensor(std::vector<float>{1})));
  {
    tc::ProgramBuilder b = session().NewProgram();  // no context
    b.Backward({b.Add("sum", {w}).out(0)}, {w});
    EXPECT_TRUE(FailsWith(Status(b.Compile()), kInvalidArgument, v1::INVALID_REQUEST,
                          {{"field", "context_id"}}));
  }
  {
    tc::ProgramBuilder b = session().NewProgram(ctx.id());
    b.Backward({b.Add("sum", {w}).out(0)}, {w, unused});
    EXPECT_TRUE(FailsWith(Status(b.Compile()), kInvalidArgument, v1::BAD_OPERAND,
                          {{"leaf_index", "1"}, {"phase", "backward"}}));
  }
  {
    tc::ProgramBuilder b = session().NewProgram(ctx.id());
    b.Backward({b.Add("sum", {w}).out(0)}, {plain});
    EXPECT_TRUE(FailsWith(Status(b.Compile()), kInvalidArgument, v1::BAD_OPERAND,
                          {{"leaf_index", "0"}, {"tensor_id", Id(plain.handle())}}));
  }
  {
    tc::ProgramBuilder b = session().NewProgram(ctx.id());
    b.Backward({b.Add("mul", {w, w}).out(0)}, {w});  // two elements, no seed
    EXPECT_TRUE(FailsWith(Status(b.Compile()), kInvalidArgument, v1::BACKWARD_ROOT_NOT_SCALAR,
                          {{"phase", "backward"}}));
  }
}

// A program's literals stay on the server with it: they count against the session's quota
// until the program is released, and a session cannot hold programs past its quota.
TEST_F(ProgramTest, ProgramsCountAgainstTheMemoryQuota) {
  REQUIRE_OPS("add");
  ASSERT_OK_AND_ASSIGN(tc::Session s, client().CreateSession({"", 0, /*quota=*/4 << 20}));
  const tc::HostTensor mib(std::vector<float>(1 << 18, 1.0f));  // 1 MiB
  auto compile = [&] {
    tc::ProgramBuilder b = s.NewProgram(0, /*no_grad=*/true);
    b.Add("add", {b.Parameter(mib), mib}, {}, {/*fetch=*/false});
    return b.Compile();
  };
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo empty, s.Info());
  ASSERT_OK_AND_ASSIGN(tc::Program first, compile());
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo holding, s.Info());
  // Two literals of 1 MiB (the example and the constant), the request around them, and the
  // peak a run holds.
  EXPECT_GE(holding.memory_used_bytes, empty.memory_used_bytes + (2u << 20) + first.peak_bytes());
  EXPECT_LT(holding.memory_used_bytes, empty.memory_used_bytes + (3u << 20) + first.peak_bytes());
  ASSERT_OK(first.Release());
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo released, s.Info());
  EXPECT_EQ(released.memory_used_bytes, empty.memory_used_bytes);
  ASSERT_OK(s.Close());

  // Many calls and few tensors: the compile-time run fits in 96 KiB, holding the program not.
  ASSERT_OK_AND_ASSIGN(tc::Session small, client().CreateSession({"", 0, /*quota=*/96 << 10}));
  tc::ProgramBuilder chain = small.NewProgram(0, /*no_grad=*/true);
  tc::Operand h = chain.Parameter(1.0);
  for (int i = 0; i < 8000; ++i) h = chain.Add("neg", {h});  // about 16 bytes a call
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, small.Info());
  absl::StatusOr<tc::Program> held = chain.Compile();
  EXPECT_TRUE(FailsWith(Status(held), absl::StatusCode::kResourceExhausted, v1::QUOTA_EXCEEDED,
                        {{"quota_bytes", Id(96 << 10)}}));
  EXPECT_THAT(std::string(Status(held).message()), ::testing::HasSubstr("holding the program"));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, small.Info());
  EXPECT_EQ(after, before) << "a refused compile holds nothing";
}

// A compiled program holds its run's peak of the session's quota, charged once at compile:
// a tensor that would take the room a run needs is refused, the runs still fit, each run
// takes the hold back, and releasing the program gives it up. A quota with room for the
// program but not for its peak refuses the compile.
TEST_F(ProgramTest, AProgramHoldsItsRunsPeakOfTheQuota) {
  REQUIRE_OPS("cumsum");
  constexpr int64_t kQuota = 8 << 20;
  constexpr int64_t kN = 1 << 18;  // f32: 1 MiB
  ASSERT_OK_AND_ASSIGN(tc::Session s, client().CreateSession({"", 0, kQuota}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, s.Put(tc::HostTensor(std::vector<float>(kN, 1.0f), {kN})));
  auto compile = [&](tc::Session& in, const tc::Tensor& input) {
    tc::ProgramBuilder b = in.NewProgram(0, /*no_grad=*/true);
    tc::CallRef c = b.Add("cumsum", {b.Parameter(input, "x")}, {{"dim", int64_t{0}}});
    b.Add("cumsum", {c.out(0)}, {{"dim", int64_t{0}}}, {/*fetch=*/false});
    return b.Compile();
  };
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, s.Info());
  ASSERT_OK_AND_ASSIGN(tc::Program p, compile(s, x));
  ASSERT_GE(p.peak_bytes(), 2 * kN * 4) << "two intermediates live at once";
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo held, s.Info());
  const int64_t used = static_cast<int64_t>(held.memory_used_bytes);
  EXPECT_GE(used, static_cast<int64_t>(before.memory_used_bytes) + p.peak_bytes());
  EXPECT_LT(used, static_cast<int64_t>(before.memory_used_bytes) + p.peak_bytes() + (64 << 10))
      << "the request itself is small";

  // Fits beside the program's request, not beside its peak too.
  const int64_t room = kQuota - used;
  auto filler = [](int64_t bytes) { return tc::HostTensor(std::vector<float>(bytes / 4, 0.0f)); };
  EXPECT_TRUE(FailsWith(Status(s.Put(filler(room + p.peak_bytes() / 2))),
                        absl::StatusCode::kResourceExhausted, v1::QUOTA_EXCEEDED));
  const int64_t filled = (room - (16 << 10)) & ~3;
  ASSERT_OK_AND_ASSIGN(tc::Tensor fill, s.Put(filler(filled)));
  for (int run = 0; run < 3; ++run) {
    const absl::Status ran = Status(p.Run({x}));
    ASSERT_TRUE(ran.ok()) << "run " << run << ", whose peak is held for it: " << ran;
    ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, s.Info());
    EXPECT_EQ(static_cast<int64_t>(after.memory_used_bytes), used + filled)
        << "the run took its hold back";
  }
  ASSERT_OK(p.Release());
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo released, s.Info());
  EXPECT_EQ(static_cast<int64_t>(released.memory_used_bytes),
            static_cast<int64_t>(before.memory_used_bytes) + filled);

  // Room for the trial run and the request, not for the peak beside them: the compile is
  // refused, holding nothing. The same program again, so the same peak and request bytes.
  const int64_t request = used - static_cast<int64_t>(before.memory_used_bytes) - p.peak_bytes();
  ASSERT_GT(request, 64);
  ASSERT_OK_AND_ASSIGN(tc::Session tight, client().CreateSession({"", 0, 4 << 20}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, tight.Put(tc::HostTensor(std::vector<float>(kN, 1.0f), {kN})));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo with_y, tight.Info());
  const int64_t slack = p.peak_bytes() + request / 2;
  ASSERT_OK_AND_ASSIGN(
      tc::Tensor big,
      tight.Put(filler(((4 << 20) - static_cast<int64_t>(with_y.memory_used_bytes) - slack) & ~3)));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo tight_before, tight.Info());
  absl::StatusOr<tc::Program> refused = compile(tight, y);
  EXPECT_TRUE(FailsWith(Status(refused), absl::StatusCode::kResourceExhausted, v1::QUOTA_EXCEEDED))
      << Status(refused);
  EXPECT_THAT(std::string(Status(refused).message()), ::testing::HasSubstr("at its peak"));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo tight_after, tight.Info());
  EXPECT_EQ(tight_after, tight_before) << "a refused compile holds nothing";
}

// A fused program keeps its calls as written too (a failing run runs them): their structures
// count against the quota, the literals they share with the fused calls once.
TEST_F(ProgramTest, AFusedProgramCountsItsLiteralsOnce) {
  REQUIRE_OPS("add", "relu");
  ASSERT_OK_AND_ASSIGN(tc::Session s, client().CreateSession({"", 0, /*quota=*/4 << 20}));
  const tc::HostTensor mib(std::vector<float>(1 << 18, 1.0f));  // 1 MiB
  tc::ProgramBuilder b = s.NewProgram(0, /*no_grad=*/true);
  tc::CallRef sum = b.Add("add", {b.Parameter(mib), mib});
  b.Add("relu", {sum.out(0)}, {}, {/*fetch=*/false});
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo empty, s.Info());
  ASSERT_OK_AND_ASSIGN(tc::Program p, b.Compile());
  EXPECT_EQ(p.fused_calls(), 1);
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo holding, s.Info());
  EXPECT_GE(holding.memory_used_bytes, empty.memory_used_bytes + (2u << 20) + p.peak_bytes());
  EXPECT_LT(holding.memory_used_bytes, empty.memory_used_bytes + (3u << 20) + p.peak_bytes());
  ASSERT_OK(p.Release());
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo released, s.Info());
  EXPECT_EQ(released.memory_used_bytes, empty.memory_used_bytes);
  ASSERT_OK(s.Close());
}

TEST_F(ProgramTest, CallsPerProgramAreLimited) {
  v1::CompileProgramRequest req;
  req.set_session_id(session().id());
  for (int i = 0; i < 10001; ++i) req.add_calls()->set_op("neg");
  v1::CompileProgramResponse resp;
  grpc::ClientContext context;
  EXPECT_TRUE(FailsWith(tc::FromGrpcStatus(RawStub()->CompileProgram(&context, req, &resp)),
                        absl::StatusCode::kResourceExhausted, v1::LIMIT_EXCEEDED,
                        {{"limit", "max_calls_per_program"}, {"value", "10001"}}));
}

}  // namespace
}  // namespace tensord::service_test
