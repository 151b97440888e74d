// tensordctl against servers with TLS, mutual TLS and bearer tokens (--tls-ca, --tls-cert,
// --tls-key, --token, $TENSORD_TOKEN). Certificates are made at test time.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"
#include "tests/service/test_certs.h"

namespace tensord::service_test {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

constexpr char kToken[] = "ctl-token-0123456789abcdef";

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class TensordctlSecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTestCerts("tensordctl_security_certs"));
    ASSERT_FALSE(dir_->empty()) << "scripts/make-test-certs.sh failed";
    std::ofstream(Path("tokens.txt")) << kToken << " ops-team\n";
  }
  static void TearDownTestSuite() {
    RemoveTestCerts(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }

  void Start(bool mtls) {
    ServerOptions options = TestServerOptions();
    options.tls_cert_path = Path("server.pem");
    options.tls_key_path = Path("server.key");
    if (mtls) options.tls_client_ca_path = Path("ca.pem");
    options.auth_tokens_path = Path("tokens.txt");
    absl::StatusOr<std::unique_ptr<TensordServer>> server = TensordServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // Runs `ENV tensordctl --address localhost:PORT --timeout 10 ARGS`.
  Result Run(const std::string& args, const std::string& env = "") {
    const std::string err_path = *dir_ + "/stderr.txt";
    const std::string command =
        absl::StrCat(env, " ", TENSORDCTL_PATH, " --address localhost:", server_->port(),
                     " --timeout 10 ", args, " 2>", err_path);
    Result r;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return r;
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.out.append(buffer, n);
    const int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream err(err_path);
    std::stringstream ss;
    ss << err.rdbuf();
    r.err = ss.str();
    return r;
  }
  std::string Ca() { return absl::StrCat("--tls-ca ", Path("ca.pem")); }

  static std::string* dir_;
  std::unique_ptr<TensordServer> server_;
};

std::string* TensordctlSecurityTest::dir_ = nullptr;

TEST_F(TensordctlSecurityTest, TlsCaAndToken) {
  Start(/*mtls=*/false);
  Result devices = Run(absl::StrCat(Ca(), " --token ", kToken, " devices"));
  EXPECT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_THAT(devices.out, HasSubstr("\ncpu "));
  // The token from the environment (kept off the command line), the = spelling of the flag.
  Result created = Run(absl::StrCat("--tls-ca=", Path("ca.pem"), " session create --ttl 60"),
                       absl::StrCat("TENSORD_TOKEN=", kToken));
  EXPECT_EQ(created.exit_code, 0) << created.err;
  EXPECT_THAT(created.out, MatchesRegex("[0-9a-f]{32}\n"));
  // Health needs TLS but no token.
  Result health = Run(absl::StrCat(Ca(), " health"));
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_EQ(health.out, "SERVING\n");
}

TEST_F(TensordctlSecurityTest, FailuresSayWhy) {
  Start(/*mtls=*/false);
  Result no_token = Run(absl::StrCat(Ca(), " ops"));
  EXPECT_EQ(no_token.exit_code, 1);
  EXPECT_THAT(no_token.err, HasSubstr("UNAUTHENTICATED cause=missing"));
  const std::string wrong = "ctl-wrong-000000000000000";
  Result bad_token = Run(absl::StrCat(Ca(), " --token ", wrong, " ops"));
  EXPECT_EQ(bad_token.exit_code, 1);
  EXPECT_THAT(bad_token.err, HasSubstr("cause=unknown"));
  EXPECT_THAT(bad_token.err, Not(HasSubstr(wrong)));
  Result plaintext = Run(absl::StrCat("--token ", kToken, " devices"));
  EXPECT_EQ(plaintext.exit_code, 1);
  EXPECT_THAT(plaintext.err, HasSubstr("UNAVAILABLE"));
  Result missing_ca = Run(absl::StrCat("--tls-ca ", Path("nope.pem"), " devices"));
  EXPECT_EQ(missing_ca.exit_code, 1);
  EXPECT_THAT(missing_ca.err, HasSubstr("nope.pem"));
}

TEST_F(TensordctlSecurityTest, MutualTls) {
  Start(/*mtls=*/true);
  const std::string client_pair =
      absl::StrCat(" --tls-cert ", Path("client.pem"), " --tls-key ", Path("client.key"));
  Result ok = Run(absl::StrCat(Ca(), client_pair, " --token ", kToken, " devices"));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  Result no_cert = Run(absl::StrCat(Ca(), " --token ", kToken, " devices"));
  EXPECT_EQ(no_cert.exit_code, 1);
  EXPECT_THAT(no_cert.err, HasSubstr("UNAVAILABLE"));
  Result half = Run(absl::StrCat(Ca(), " --tls-cert ", Path("client.pem"), " devices"));
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_THAT(half.err, HasSubstr("--tls-cert and --tls-key go together"));
}

}  // namespace
}  // namespace tensord::service_test
