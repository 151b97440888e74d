// The tensordctl CLI, run as a separate process against the in-process server: its commands,
// the demo's report and what a transfer shows on a terminal and off it.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"
#include "tests/service/tensordctl_run.h"

namespace tensord::service_test {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

class TensordctlTest : public ServiceTest {
 protected:
  std::string Address() const { return absl::StrCat("127.0.0.1:", server().port()); }
  CtlResult Run(const std::string& args, const std::string& env = "") { return RunCtl(args, env); }
  CtlResult Ctl(const std::string& args) {
    return Run(absl::StrCat("--address ", Address(), " ", args));
  }
  static std::string Path(const std::string& name) { return CtlPath(name); }
};

TEST_F(TensordctlTest, HealthExitsZeroOnlyWhenServing) {
  CtlResult ok = Ctl("health");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "SERVING\n");
  // The address may come from the environment.
  CtlResult env = Run("health", absl::StrCat("TENSORD_ADDRESS=", Address()));
  EXPECT_EQ(env.exit_code, 0) << env.err;
  // A server that is gone.
  std::unique_ptr<ServerAndClient> other = StartServer(TestServerOptions());
  ASSERT_NE(other, nullptr);
  const int port = other->server->port();
  other.reset();
  CtlResult down = Run(absl::StrCat("--address 127.0.0.1:", port, " --timeout 2 health"));
  EXPECT_NE(down.exit_code, 0);
  EXPECT_THAT(down.out, HasSubstr("NOT_SERVING"));
}

TEST_F(TensordctlTest, DevicesAndOps) {
  CtlResult devices = Ctl("devices");
  EXPECT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_THAT(devices.out, HasSubstr("\ncpu "));
  CtlResult ops = Ctl("ops");
  ASSERT_EQ(ops.exit_code, 0) << ops.err;
  std::vector<std::string> lines = absl::StrSplit(ops.out, '\n', absl::SkipEmpty());
  ASSERT_GT(lines.size(), 3u);
  EXPECT_THAT(lines[0], MatchesRegex("NAME +CATEGORY +MARKING +DTYPES +BACKENDS( +ORIGIN)?"));
  auto row = [&](const std::string& name) {
    for (const std::string& l : lines) {
      if (l.rfind(name + " ", 0) == 0) return l;
    }
    return std::string();
  };
  EXPECT_THAT(
      row("add"),
      MatchesRegex(
          "add +elementwise +differentiable +f32,f64,[a-z0-9,]* +cpu(,[a-z]+)*( +builtin)?"));
  EXPECT_THAT(row("assign"), MatchesRegex("assign +[a-z]+ +non_differentiable .*"));
  EXPECT_THAT(row("floor"), MatchesRegex("floor +[a-z]+ +zero_grad .*"));
  ASSERT_OK_AND_ASSIGN(std::vector<tc::OpInfo> served, client().Ops());
  EXPECT_EQ(lines.back(), absl::StrCat(served.size(), " ops"));
}

TEST_F(TensordctlTest, SessionPutGetAcrossInvocations) {
  tc::HostTensor value(std::vector<float>{1.5f, -2, 3, 4, 5, 6}, {3, 2});
  ASSERT_OK(value.WriteNpy(Path("in.npy")));
  CtlResult created = Ctl("session create --ttl 120");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string id(absl::StripSuffix(created.out, "\n"));
  EXPECT_THAT(id, MatchesRegex("[0-9a-f]{32}"));
  CtlResult put = Ctl(absl::StrCat("put --session ", id, " ", Path("in.npy")));
  ASSERT_EQ(put.exit_code, 0) << put.err;
  uint64_t handle = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripSuffix(put.out, "\n"), &handle)) << put.out;
  CtlResult get = Ctl(absl::StrCat("get --session ", id, " ", handle, " ", Path("out.npy")));
  ASSERT_EQ(get.exit_code, 0) << get.err;
  ASSERT_OK_AND_ASSIGN(tc::HostTensor back, tc::HostTensor::ReadNpy(Path("out.npy")));
  EXPECT_EQ(back, value);
  // The session is visible to this test's client too.
  ASSERT_OK_AND_ASSIGN(tc::Session attached, client().AttachSession(id));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, attached.Info());
  ASSERT_EQ(info.tensors.size(), 1u);
  EXPECT_EQ(info.tensors[0].handle, handle);
  EXPECT_EQ(info.ttl_seconds, 120u);
  CtlResult shown = Ctl(absl::StrCat("session info ", id));
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr(absl::StrCat("tensor ", handle, " f32[3, 2]")));
  EXPECT_EQ(Ctl(absl::StrCat("session keepalive ", id)).out, "ttl 120 s\n");
  CtlResult closed = Ctl(absl::StrCat("session close ", id));
  EXPECT_EQ(closed.exit_code, 0) << closed.err;
  CtlResult after = Ctl(absl::StrCat("get --session ", id, " ", handle, " ", Path("gone.npy")));
  EXPECT_EQ(after.exit_code, 1);
  EXPECT_THAT(after.err, HasSubstr("SESSION_NOT_FOUND"));
}

TEST_F(TensordctlTest, PutWithoutSessionCreatesOne) {
  tc::HostTensor value(std::vector<int64_t>{7, 8, 9});
  ASSERT_OK(value.WriteNpy(Path("ints.npy")));
  CtlResult put = Ctl(absl::StrCat("put ", Path("ints.npy")));
  ASSERT_EQ(put.exit_code, 0) << put.err;
  std::vector<std::string> fields = absl::StrSplit(absl::StripSuffix(put.out, "\n"), ' ');
  ASSERT_EQ(fields.size(), 2u) << put.out;
  ASSERT_OK_AND_ASSIGN(tc::Session s, client().AttachSession(fields[0]));
  uint64_t handle = 0;
  ASSERT_TRUE(absl::SimpleAtoi(fields[1], &handle));
  ASSERT_OK_AND_ASSIGN(tc::HostTensor back, s.Get(handle));
  EXPECT_EQ(back, value);
  ASSERT_OK(s.Close());
}

TEST_F(TensordctlTest, Roundtrip) {
  tc::HostTensor value(std::vector<bool>{true, false, false, true}, {2, 2});
  ASSERT_OK(value.WriteNpy(Path("bools.npy")));
  CtlResult r = Ctl(absl::StrCat("roundtrip ", Path("bools.npy"), " ", Path("bools_out.npy")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("bool[2, 2] 4 bytes identical"));
  ASSERT_OK_AND_ASSIGN(tc::HostTensor back, tc::HostTensor::ReadNpy(Path("bools_out.npy")));
  EXPECT_EQ(back, value);
  CtlResult missing = Ctl(absl::StrCat("roundtrip ", Path("nope.npy"), " ", Path("x.npy")));
  EXPECT_EQ(missing.exit_code, 1);
}

// numpy's uint8, int8 and int16 files ('|u1', '|i1', '<i2') go through the server unchanged.
TEST_F(TensordctlTest, RoundtripNarrowIntegers) {
  const std::vector<std::pair<tc::HostTensor, std::string>> cases = {
      {tc::HostTensor(std::vector<uint8_t>{0, 1, 128, 255}, {2, 2}), "u8[2, 2] 4 bytes identical"},
      {tc::HostTensor(std::vector<int8_t>{-128, -1, 0, 127}), "i8[4] 4 bytes identical"},
      {tc::HostTensor(std::vector<int16_t>{-32768, 300}, {2, 1}), "i16[2, 1] 4 bytes identical"},
  };
  for (const auto& [value, summary] : cases) {
    const std::string name = tc::DTypeName(value.dtype());
    ASSERT_OK(value.WriteNpy(Path(name + ".npy")));
    CtlResult r =
        Ctl(absl::StrCat("roundtrip ", Path(name + ".npy"), " ", Path(name + "_out.npy")));
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr(summary));
    ASSERT_OK_AND_ASSIGN(tc::HostTensor back, tc::HostTensor::ReadNpy(Path(name + "_out.npy")));
    EXPECT_EQ(back, value) << name;
  }
}

TEST_F(TensordctlTest, DemoLossFalls) {
  REQUIRE_OPS("matmul", "relu", "cross_entropy", "assign", "randn", "zeros", "sub", "mul");
  CtlResult demo = Ctl("demo --steps 60 --every 1");
  ASSERT_EQ(demo.exit_code, 0) << demo.out << demo.err;
  std::vector<double> losses;
  for (absl::string_view line : absl::StrSplit(demo.out, '\n')) {
    if (!absl::ConsumePrefix(&line, "step")) continue;
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    ASSERT_EQ(parts.size(), 5u) << line;
    double loss = 0;
    ASSERT_TRUE(absl::SimpleAtod(parts[2], &loss)) << line;
    losses.push_back(loss);
  }
  ASSERT_EQ(losses.size(), 60u) << demo.out;
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << demo.out;
  EXPECT_THAT(demo.out, HasSubstr("accuracy"));
}

// The step numbers of the demo's per-step lines, each checked for its loss and pace.
std::vector<int> DemoSteps(const std::string& out) {
  std::vector<int> steps;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (!absl::StartsWith(line, "step")) continue;
    EXPECT_THAT(std::string(line),
                MatchesRegex("step +[0-9]+  loss [0-9]+\\.[0-9]{5} +[0-9]+\\.[0-9] steps/s"));
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int step = 0;
    double rate = 0;
    if (parts.size() == 6 && absl::SimpleAtoi(parts[1], &step) &&
        absl::SimpleAtod(parts[4], &rate)) {
      EXPECT_GT(rate, 0) << line;
      steps.push_back(step);
    }
  }
  return steps;
}

TEST_F(TensordctlTest, DemoReportsEveryNStepsAndSumsUp) {
  REQUIRE_OPS("matmul", "relu", "cross_entropy", "assign", "randn", "zeros", "sub", "mul");
  CtlResult demo = Ctl("demo --steps 20 --every 5");
  ASSERT_EQ(demo.exit_code, 0) << demo.out << demo.err;
  EXPECT_EQ(DemoSteps(demo.out), (std::vector<int>{5, 10, 15, 20})) << demo.out;
  std::vector<std::string> lines = absl::StrSplit(demo.out, '\n', absl::SkipEmpty());
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines.back(), MatchesRegex("20 steps in [0-9]+\\.[0-9]{2} s \\([0-9]+\\.[0-9] "
                                         "steps/s\\), loss [0-9.]+ -> [0-9.]+, accuracy .*%"));
  // Without --every, about ten lines; the last step always has one.
  CtlResult plain = Ctl("demo --steps 25");
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  EXPECT_EQ(DemoSteps(plain.out), (std::vector<int>{3, 6, 9, 12, 15, 18, 21, 24, 25})) << plain.out;
  EXPECT_EQ(Ctl("demo --steps 5 --every 0").exit_code, 2);
}

// Big enough for the progress line (1 MiB and more), in several 1 MiB chunks.
tc::HostTensor LargeTensor() {
  std::vector<float> values(3 << 20 >> 2);  // 3 MiB of f32
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 977);
  return tc::HostTensor(values);
}

TEST_F(TensordctlTest, TransfersAreQuietWhenStderrIsNoTerminal) {
  ASSERT_OK(LargeTensor().WriteNpy(Path("large.npy")));
  CtlResult put = Ctl(absl::StrCat("put ", Path("large.npy")));
  ASSERT_EQ(put.exit_code, 0) << put.err;
  // Only what a script reads: the tensor's type, no progress line or summary.
  EXPECT_EQ(put.err, "f32[786432]\n");
  std::vector<std::string> fields = absl::StrSplit(absl::StripSuffix(put.out, "\n"), ' ');
  ASSERT_EQ(fields.size(), 2u) << put.out;
  CtlResult get =
      Ctl(absl::StrCat("get --session ", fields[0], " ", fields[1], " ", Path("large_out.npy")));
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(get.err, "f32[786432]\n");
  ASSERT_OK_AND_ASSIGN(tc::HostTensor back, tc::HostTensor::ReadNpy(Path("large_out.npy")));
  EXPECT_EQ(back, LargeTensor());
  EXPECT_EQ(Ctl(absl::StrCat("session close ", fields[0])).exit_code, 0);
}

TEST_F(TensordctlTest, TransfersShowProgressOnATerminal) {
  ASSERT_OK(LargeTensor().WriteNpy(Path("large_tty.npy")));
  CtlResult r =
      RunCtlOnTerminal(absl::StrCat("--address ", Address(), " --timeout 60 roundtrip ",
                                    Path("large_tty.npy"), " ", Path("large_tty_out.npy")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("f32[786432] 3145728 bytes identical"));
  // Each transfer ends with its summary, drawn over its progress line.
  EXPECT_THAT(r.err, ContainsRegex("\rput 3\\.0 MiB in [0-9.]+ s, [0-9.]+ [KMG]?i?B/s *\r\n"));
  EXPECT_THAT(r.err, ContainsRegex("\rget 3\\.0 MiB in [0-9.]+ s, [0-9.]+ [KMG]?i?B/s *\r\n"));
  // A small tensor is done before anyone could read a progress line.
  tc::HostTensor small(std::vector<float>{1, 2, 3});
  ASSERT_OK(small.WriteNpy(Path("small_tty.npy")));
  CtlResult quiet = RunCtlOnTerminal(absl::StrCat(
      "--address ", Address(), " roundtrip ", Path("small_tty.npy"), " ", Path("small_out.npy")));
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
}

TEST_F(TensordctlTest, UsageErrors) {
  EXPECT_EQ(Ctl("").exit_code, 2);
  EXPECT_EQ(Ctl("frobnicate").exit_code, 2);
  EXPECT_EQ(Ctl("get 1 out.npy").exit_code, 2) << "get needs --session";
  CtlResult help = Ctl("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("usage: tensordctl"));
}

}  // namespace
}  // namespace tensord::service_test
