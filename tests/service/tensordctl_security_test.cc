// tensordctl against servers with TLS, mutual TLS and bearer tokens (--tls-ca, --tls-cert,
// --tls-key, --token, $TENSORD_TOKEN). Certificates are made at test time.
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"
#include "tests/service/tensordctl_run.h"
#include "tests/service/test_certs.h"

namespace tensord::service_test {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

constexpr char kToken[] = "ctl-token-0123456789abcdef";

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
  CtlResult Run(const std::string& args, const std::string& env = "") {
    return RunCtl(absl::StrCat("--address localhost:", server_->port(), " --timeout 10 ", args),
                  env);
  }
  std::string Ca() { return absl::StrCat("--tls-ca ", Path("ca.pem")); }

  static std::string* dir_;
  std::unique_ptr<TensordServer> server_;
};

std::string* TensordctlSecurityTest::dir_ = nullptr;

TEST_F(TensordctlSecurityTest, TlsCaAndToken) {
  Start(/*mtls=*/false);
  CtlResult devices = Run(absl::StrCat(Ca(), " --token ", kToken, " devices"));
  EXPECT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_THAT(devices.out, HasSubstr("\ncpu "));
  // The token from the environment (kept off the command line), the = spelling of the flag.
  CtlResult created = Run(absl::StrCat("--tls-ca=", Path("ca.pem"), " session create --ttl 60"),
                          absl::StrCat("TENSORD_TOKEN=", kToken));
  EXPECT_EQ(created.exit_code, 0) << created.err;
  EXPECT_THAT(created.out, MatchesRegex("[0-9a-f]{32}\n"));
  // Health needs TLS but no token.
  CtlResult health = Run(absl::StrCat(Ca(), " health"));
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_EQ(health.out, "SERVING\n");
}

TEST_F(TensordctlSecurityTest, FailuresSayWhy) {
  Start(/*mtls=*/false);
  CtlResult no_token = Run(absl::StrCat(Ca(), " ops"));
  EXPECT_EQ(no_token.exit_code, 1);
  EXPECT_THAT(no_token.err, HasSubstr("UNAUTHENTICATED cause=missing"));
  const std::string wrong = "ctl-wrong-000000000000000";
  CtlResult bad_token = Run(absl::StrCat(Ca(), " --token ", wrong, " ops"));
  EXPECT_EQ(bad_token.exit_code, 1);
  EXPECT_THAT(bad_token.err, HasSubstr("cause=unknown"));
  EXPECT_THAT(bad_token.err, Not(HasSubstr(wrong)));
  CtlResult plaintext = Run(absl::StrCat("--token ", kToken, " devices"));
  EXPECT_EQ(plaintext.exit_code, 1);
  EXPECT_THAT(plaintext.err, HasSubstr("UNAVAILABLE"));
  CtlResult missing_ca = Run(absl::StrCat("--tls-ca ", Path("nope.pem"), " devices"));
  EXPECT_EQ(missing_ca.exit_code, 1);
  EXPECT_THAT(missing_ca.err, HasSubstr("nope.pem"));
}

TEST_F(TensordctlSecurityTest, MutualTls) {
  Start(/*mtls=*/true);
  const std::string client_pair =
      absl::StrCat(" --tls-cert ", Path("client.pem"), " --tls-key ", Path("client.key"));
  CtlResult ok = Run(absl::StrCat(Ca(), client_pair, " --token ", kToken, " devices"));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  CtlResult no_cert = Run(absl::StrCat(Ca(), " --token ", kToken, " devices"));
  EXPECT_EQ(no_cert.exit_code, 1);
  EXPECT_THAT(no_cert.err, HasSubstr("UNAVAILABLE"));
  CtlResult half = Run(absl::StrCat(Ca(), " --tls-cert ", Path("client.pem"), " devices"));
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_THAT(half.err, HasSubstr("--tls-cert and --tls-key go together"));
}

}  // namespace
}  // namespace tensord::service_test
