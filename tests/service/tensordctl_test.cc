// The tensordctl CLI, run as a separate process against the in-process server.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class TensordctlTest : public ServiceTest {
 protected:
  std::string Address() const { return absl::StrCat("127.0.0.1:", server().port()); }

  // Runs `tensordctl ARGS` (ARGS already shell-quoted where needed).
  Result Run(const std::string& args, const std::string& env = "") {
    const std::string err_path = Path("stderr.txt");
    const std::string command = absl::StrCat(env, " ", TENSORDCTL_PATH, " ", args, " 2>", err_path);
    Result r;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return r;
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.out.append(buffer, n);
    int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream err(err_path);
    std::stringstream ss;
    ss << err.rdbuf();
    r.err = ss.str();
    return r;
  }
  Result Ctl(const std::string& args) {
    return Run(absl::StrCat("--address ", Address(), " ", args));
  }

  // Files of this process only: ctest runs each test as its own process, several at once.
  static std::string Path(const std::string& name) {
    static const std::string* dir = [] {
      std::string pattern = ::testing::TempDir() + "/tensordctl_test.XXXXXX";
      if (mkdtemp(pattern.data()) == nullptr) pattern = ::testing::TempDir();
      return new std::string(pattern);
    }();
    return *dir + "/" + name;
  }
};

TEST_F(TensordctlTest, HealthExitsZeroOnlyWhenServing) {
  Result ok = Ctl("health");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "SERVING\n");
  // The address may come from the environment.
  Result env = Run("health", absl::StrCat("TENSORD_ADDRESS=", Address()));
  EXPECT_EQ(env.exit_code, 0) << env.err;
  // A server that is gone.
  std::unique_ptr<ServerAndClient> other = StartServer(TestServerOptions());
  ASSERT_NE(other, nullptr);
  const int port = other->server->port();
  other.reset();
  Result down = Run(absl::StrCat("--address 127.0.0.1:", port, " --timeout 2 health"));
  EXPECT_NE(down.exit_code, 0);
  EXPECT_THAT(down.out, HasSubstr("NOT_SERVING"));
}

TEST_F(TensordctlTest, DevicesAndOps) {
  Result devices = Ctl("devices");
  EXPECT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_THAT(devices.out, HasSubstr("\ncpu "));
  Result ops = Ctl("ops");
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
      MatchesRegex("add +elementwise +differentiable +f32,f64,[a-z0-9,]* +cpu( +builtin)?"));
  EXPECT_THAT(row("assign"), MatchesRegex("assign +[a-z]+ +non_differentiable .*"));
  EXPECT_THAT(row("floor"), MatchesRegex("floor +[a-z]+ +zero_grad .*"));
  ASSERT_OK_AND_ASSIGN(std::vector<tc::OpInfo> served, client().Ops());
  EXPECT_EQ(lines.back(), absl::StrCat(served.size(), " ops"));
}

TEST_F(TensordctlTest, SessionPutGetAcrossInvocations) {
  tc::HostTensor value(std::vector<float>{1.5f, -2, 3, 4, 5, 6}, {3, 2});
  ASSERT_OK(value.WriteNpy(Path("in.npy")));
  Result created = Ctl("session create --ttl 120");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string id(absl::StripSuffix(created.out, "\n"));
  EXPECT_THAT(id, MatchesRegex("[0-9a-f]{32}"));
  Result put = Ctl(absl::StrCat("put --session ", id, " ", Path("in.npy")));
  ASSERT_EQ(put.exit_code, 0) << put.err;
  uint64_t handle = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripSuffix(put.out, "\n"), &handle)) << put.out;
  Result get = Ctl(absl::StrCat("get --session ", id, " ", handle, " ", Path("out.npy")));
  ASSERT_EQ(get.exit_code, 0) << get.err;
  ASSERT_OK_AND_ASSIGN(tc::HostTensor back, tc::HostTensor::ReadNpy(Path("out.npy")));
  EXPECT_EQ(back, value);
  // The session is visible to this test's client too.
  ASSERT_OK_AND_ASSIGN(tc::Session attached, client().AttachSession(id));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, attached.Info());
  ASSERT_EQ(info.tensors.size(), 1u);
  EXPECT_EQ(info.tensors[0].handle, handle);
  EXPECT_EQ(info.ttl_seconds, 120u);
  Result shown = Ctl(absl::StrCat("session info ", id));
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr(absl::StrCat("tensor ", handle, " f32[3, 2]")));
  EXPECT_EQ(Ctl(absl::StrCat("session keepalive ", id)).out, "ttl 120 s\n");
  Result closed = Ctl(absl::StrCat("session close ", id));
  EXPECT_EQ(closed.exit_code, 0) << closed.err;
  Result after = Ctl(absl::StrCat("get --session ", id, " ", handle, " ", Path("gone.npy")));
  EXPECT_EQ(after.exit_code, 1);
  EXPECT_THAT(after.err, HasSubstr("SESSION_NOT_FOUND"));
}

TEST_F(TensordctlTest, PutWithoutSessionCreatesOne) {
  tc::HostTensor value(std::vector<int64_t>{7, 8, 9});
  ASSERT_OK(value.WriteNpy(Path("ints.npy")));
  Result put = Ctl(absl::StrCat("put ", Path("ints.npy")));
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
  Result r = Ctl(absl::StrCat("roundtrip ", Path("bools.npy"), " ", Path("bools_out.npy")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("bool[2, 2] 4 bytes identical"));
  ASSERT_OK_AND_ASSIGN(tc::HostTensor back, tc::HostTensor::ReadNpy(Path("bools_out.npy")));
  EXPECT_EQ(back, value);
  Result missing = Ctl(absl::StrCat("roundtrip ", Path("nope.npy"), " ", Path("x.npy")));
  EXPECT_EQ(missing.exit_code, 1);
}

TEST_F(TensordctlTest, DemoLossFalls) {
  REQUIRE_OPS("matmul", "relu", "cross_entropy", "assign", "randn", "zeros", "sub", "mul");
  Result demo = Ctl("demo --steps 60");
  ASSERT_EQ(demo.exit_code, 0) << demo.out << demo.err;
  std::vector<double> losses;
  for (absl::string_view line : absl::StrSplit(demo.out, '\n')) {
    if (!absl::ConsumePrefix(&line, "step")) continue;
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    ASSERT_EQ(parts.size(), 3u) << line;
    double loss = 0;
    ASSERT_TRUE(absl::SimpleAtod(parts[2], &loss)) << line;
    losses.push_back(loss);
  }
  ASSERT_EQ(losses.size(), 60u) << demo.out;
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << demo.out;
  EXPECT_THAT(demo.out, HasSubstr("accuracy"));
}

TEST_F(TensordctlTest, UsageErrors) {
  EXPECT_EQ(Ctl("").exit_code, 2);
  EXPECT_EQ(Ctl("frobnicate").exit_code, 2);
  EXPECT_EQ(Ctl("get 1 out.npy").exit_code, 2) << "get needs --session";
  Result help = Ctl("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("usage: tensordctl"));
}

}  // namespace
}  // namespace tensord::service_test
