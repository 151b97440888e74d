// tensordctl demo: trains a small MLP through the server as a compiled program (one round trip
// a step), reporting the loss and the pace.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/tensordctl_commands.h"

namespace tensordctl {
namespace {

// The demo's data: points in [-1, 1]^2, class 1 outside the circle of radius^2 0.5.
void MakeCircles(int n, uint32_t seed, std::vector<float>* x, std::vector<int64_t>* y) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int i = 0; i < n; ++i) {
    float a = u(rng), b = u(rng);
    x->push_back(a);
    x->push_back(b);
    y->push_back(a * a + b * b > 0.5f ? 1 : 0);
  }
}

struct DemoOptions {
  int steps = 100;
  int every = 0;  // a line every `every` steps; 0 = about ten lines in all
  double lr = 0.5;
  uint32_t seed = 7;
  tc::Checkpointing checkpointing = tc::Checkpointing::kNone;
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

absl::Status RunDemo(const tc::Client& client, const DemoOptions& options) {
  const int steps = options.steps;
  const double lr = options.lr;
  const uint32_t seed = options.seed;
  const tc::Checkpointing ckpt = options.checkpointing;
  const int every = options.every > 0 ? options.every : (steps + 9) / 10;
  constexpr int kPoints = 256, kHidden = 16;
  absl::StatusOr<tc::Session> session = client.CreateSession();
  if (!session.ok()) return session.status();
  absl::StatusOr<tc::AutodiffContext> ctx = session->OpenAutodiff(ckpt);
  if (!ctx.ok()) return ctx.status();

  std::vector<float> xs;
  std::vector<int64_t> ys;
  MakeCircles(kPoints, seed, &xs, &ys);
  absl::StatusOr<tc::Tensor> x = session->Put(tc::HostTensor(xs, {kPoints, 2}));
  if (!x.ok()) return x.status();
  absl::StatusOr<tc::Tensor> y = session->Put(tc::HostTensor(ys));
  if (!y.ok()) return y.status();

  // Parameters are created on the server: randn scaled (He init) as requires-grad leaves.
  tc::Batch init = session->NewBatch({/*no_grad=*/false, ctx->id()});
  auto he = [&](std::vector<int64_t> shape, int64_t s) {
    tc::CallRef r = init.Add("randn", {}, {{"shape", shape}, {"seed", s}});
    return init.Add("mul", {r, std::sqrt(2.0 / static_cast<double>(shape[0]))}, {}, {true});
  };
  tc::CallRef w1 = he({2, kHidden}, seed + 1);
  tc::CallRef b1 = init.Add("zeros", {}, {{"shape", {kHidden}}}, {true});
  tc::CallRef w2 = he({kHidden, 2}, seed + 2);
  tc::CallRef b2 = init.Add("zeros", {}, {{"shape", {2}}}, {true});
  absl::StatusOr<tc::BatchResult> created = init.Run();
  if (!created.ok()) return created.status();
  std::vector<tc::Tensor> params = {created->output(w1), created->output(b1), created->output(w2),
                                    created->output(b2)};
  std::printf(
      "training a 2-%d-2 MLP on %d points (session %s, %s checkpointing, lr %g), one RunProgram "
      "a step\n",
      kHidden, kPoints, session->id().c_str(),
      ckpt == tc::Checkpointing::kBalanced ? "balanced" : "no", lr);

  // The step as a program: compiled once, then one RunProgram per step runs the forward, the
  // backward and the SGD updates (p <- p - lr * grad, in place) on the server.
  tc::ProgramBuilder b = session->NewProgram(ctx->id());
  tc::CallRef hidden = b.Add("relu", {b.Add("add", {b.Add("matmul", {*x, params[0]}), params[1]})});
  tc::CallRef out =
      b.Add("add", {b.Add("matmul", {hidden, params[2]}), params[3]}, {}, {/*fetch=*/true});
  tc::CallRef loss = b.Add("cross_entropy", {out, *y}, {}, {/*fetch=*/true});
  b.Backward({loss.out(0)}, params);
  for (const tc::Tensor& p : params) {
    b.Update("sgd", {p, tc::Operand::GradientOf(p.handle())}, {{"lr", lr}});
  }
  absl::StatusOr<tc::Program> program = b.Compile();
  if (!program.ok()) return program.status();

  double first_loss = 0, last_loss = 0;
  tc::HostTensor logits;
  const auto start = std::chrono::steady_clock::now();
  // The pace of each line is that of the steps since the line before.
  auto line_start = start;
  int line_first_step = 1;
  for (int step = 1; step <= steps; ++step) {
    absl::StatusOr<tc::ProgramResult> ran = program->Run({});
    if (!ran.ok()) return ran.status();
    const float* value = ran->value(loss).data<float>();
    if (value == nullptr) return absl::InternalError("demo: the loss is not f32");
    if (step == 1) first_loss = *value;
    last_loss = *value;
    logits = ran->value(out);
    if (step % every == 0 || step == steps) {
      const double seconds = SecondsSince(line_start);
      const int done = step - line_first_step + 1;
      std::printf("step %4d  loss %.5f  %7.1f steps/s\n", step, *value,
                  seconds > 0 ? done / seconds : 0.0);
      std::fflush(stdout);
      line_start = std::chrono::steady_clock::now();
      line_first_step = step + 1;
    }
  }
  const double total_seconds = SecondsSince(start);
  // Accuracy of the last forward pass (the logits it fetched, before its update).
  absl::StatusOr<std::vector<float>> l = logits.ToVector<float>();
  if (!l.ok()) return l.status();
  int correct = 0;
  for (int i = 0; i < kPoints; ++i) correct += ((*l)[2 * i + 1] > (*l)[2 * i]) == (ys[i] == 1);
  std::printf("%d steps in %.2f s (%.1f steps/s), loss %.5f -> %.5f, accuracy %.1f%%\n", steps,
              total_seconds, total_seconds > 0 ? steps / total_seconds : 0.0, first_loss, last_loss,
              100.0 * correct / kPoints);
  if (!(last_loss < first_loss)) {
    return absl::InternalError(
        absl::StrCat("demo: the loss did not fall (", first_loss, " -> ", last_loss, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

int Demo(const tc::Client& client, const Args& args) {
  DemoOptions options;
  if (const std::string* s = args.Flag("steps");
      s && (!absl::SimpleAtoi(*s, &options.steps) || options.steps < 1)) {
    return Usage("--steps takes a positive number");
  }
  if (const std::string* s = args.Flag("every");
      s && (!absl::SimpleAtoi(*s, &options.every) || options.every < 1)) {
    return Usage("--every takes a positive number of steps");
  }
  if (const std::string* s = args.Flag("lr"); s && !absl::SimpleAtod(*s, &options.lr)) {
    return Usage("--lr takes a number");
  }
  if (const std::string* s = args.Flag("seed"); s && !absl::SimpleAtoi(*s, &options.seed)) {
    return Usage("--seed takes a number");
  }
  if (const std::string* s = args.Flag("checkpointing")) {
    if (*s == "balanced") {
      options.checkpointing = tc::Checkpointing::kBalanced;
    } else if (*s != "none") {
      return Usage("--checkpointing takes none or balanced");
    }
  }
  absl::Status status = RunDemo(client, options);
  return status.ok() ? 0 : Fail(status);
}

}  // namespace tensordctl
