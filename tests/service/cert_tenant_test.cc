// Tenants from mutual-TLS client certificates (--tenant-from-cert): a SAN URI of the tenant
// form or the subject CN names the tenant; a certificate without one, or with a bad one, is
// UNAUTHENTICATED; with tokens too, token and certificate must agree or the call is
// PERMISSION_DENIED. Certificates are made at test time (scripts/make-test-certs.sh).
#include "server/service/cert_tenant.h"

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/status.h"
#include "server/service/auth.h"
#include "tests/service/service_env.h"
#include "tests/service/test_certs.h"

namespace tensord::service_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::StatusCode kUnauthenticated = absl::StatusCode::kUnauthenticated;
constexpr absl::StatusCode kPermissionDenied = absl::StatusCode::kPermissionDenied;
constexpr absl::StatusCode kExhausted = absl::StatusCode::kResourceExhausted;

constexpr char kTokenAlice[] = "cert-alice-0123456789abcdef";
constexpr char kTokenBob[] = "cert-bob-fedcba9876543210";

class CertTenantTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTestCerts("tensord_cert_tenant_certs"));
    ASSERT_FALSE(dir_->empty()) << "scripts/make-test-certs.sh failed";
    std::ofstream(Path("tokens.txt")) << kTokenAlice << " alice\n" << kTokenBob << " bob\n";
  }
  static void TearDownTestSuite() {
    RemoveTestCerts(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }
  static std::string Pem(const std::string& name) {
    std::ifstream in(Path(name));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // A mutual-TLS server taking tenants from `field`; one session per tenant, so a second
  // CreateSession names the tenant the server saw (LIMIT_EXCEEDED, metadata tenant).
  void Start(CertTenantField field, bool tokens) {
    ServerOptions options = TestServerOptions();
    options.tls_cert_path = Path("server.pem");
    options.tls_key_path = Path("server.key");
    options.tls_client_ca_path = Path("ca.pem");
    options.tenant_from_cert = field;
    options.max_sessions_per_tenant = 1;
    if (tokens) options.auth_tokens_path = Path("tokens.txt");
    absl::StatusOr<std::unique_ptr<TensordServer>> server = TensordServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // A client presenting the certificate `name`.pem (and `token`, when given).
  tc::Client Connect(const std::string& name, const std::string& token = "") {
    tc::ClientOptions options;
    options.root_certificates = Pem("ca.pem");
    options.client_certificate_chain = Pem(name + ".pem");
    options.client_private_key = Pem(name + ".key");
    options.auth_token = token;
    options.call_timeout_ms = 10000;
    absl::StatusOr<tc::Client> client =
        tc::Client::Connect(absl::StrCat("localhost:", server_->port()), options);
    EXPECT_TRUE(client.ok()) << client.status();
    return *std::move(client);
  }

  // The tenant the server admits the certificate `name` as: it creates a session, and the
  // second one is refused naming the tenant. Empty (and a test failure) otherwise.
  std::string TenantOf(const std::string& name, const std::string& token = "") {
    tc::Client client = Connect(name, token);
    absl::StatusOr<tc::Session> first = client.CreateSession();
    EXPECT_TRUE(first.ok()) << name << ": " << first.status();
    if (!first.ok()) return "";
    absl::Status second = Status(client.CreateSession());
    EXPECT_TRUE(FailsWith(second, kExhausted, v1::LIMIT_EXCEEDED)) << name;
    return tc::MetadataOf(second)["tenant"];
  }

  static std::string* dir_;
  std::unique_ptr<TensordServer> server_;
};

std::string* CertTenantTest::dir_ = nullptr;

TEST_F(CertTenantTest, SanUriNamesTheTenant) {
  Start(CertTenantField::kSanUri, /*tokens=*/false);
  EXPECT_EQ(TenantOf("alice-uri"), "alice");  // spiffe://tensord.test/tenant/alice
  EXPECT_EQ(TenantOf("bob-uri"), "bob");      // tensord://tenant/bob beside another URI
  EXPECT_THAT(server_->security_summary(), HasSubstr("tenants from certificate san-uri"));

  // Tenants are isolated as with tokens: bob cannot see alice's session.
  ASSERT_OK_AND_ASSIGN(tc::Session session, Connect("alice-uri").CreateSession());
  EXPECT_TRUE(FailsWith(Status(Connect("bob-uri").AttachSession(session.id())),
                        absl::StatusCode::kNotFound, v1::SESSION_NOT_FOUND));
  ASSERT_OK_AND_ASSIGN(tc::Session again, Connect("alice-uri").AttachSession(session.id()));
  EXPECT_EQ(again.id(), session.id());
}

TEST_F(CertTenantTest, SanUriCertificatesWithoutAGoodTenantAreRefused) {
  Start(CertTenantField::kSanUri, /*tokens=*/false);
  tc::Client cn_only = Connect("client");
  ASSERT_OK_AND_ASSIGN(bool serving, cn_only.Health());
  EXPECT_TRUE(serving) << "health needs no tenant";
  EXPECT_TRUE(FailsWith(Status(cn_only.CreateSession()), kUnauthenticated, v1::UNAUTHENTICATED,
                        {{"cause", "certificate_no_tenant"}, {"cert_field", "san-uri"}}));
  EXPECT_TRUE(FailsWith(
      Status(Connect("bad-cn").Devices()), kUnauthenticated, v1::UNAUTHENTICATED,
      {{"cause", "certificate_bad_tenant"}, {"cert_value", "spiffe://tensord.test/tenant/b@d"}}));
  absl::Status two = Status(Connect("two-tenants").Ops());
  EXPECT_TRUE(
      FailsWith(two, kUnauthenticated, v1::UNAUTHENTICATED, {{"cause", "certificate_ambiguous"}}));
  EXPECT_THAT(std::string(two.message()), HasSubstr("'alice' and 'bob'"));
}

TEST_F(CertTenantTest, CommonNameNamesTheTenant) {
  Start(CertTenantField::kCn, /*tokens=*/false);
  EXPECT_EQ(TenantOf("carol-cn"), "carol");
  EXPECT_EQ(TenantOf("client"), "tensord-client");
  EXPECT_EQ(TenantOf("alice-uri"), "tensord-alice");  // the CN, not the URI
  EXPECT_TRUE(FailsWith(
      Status(Connect("bad-cn").CreateSession()), kUnauthenticated, v1::UNAUTHENTICATED,
      {{"cause", "certificate_bad_tenant"}, {"cert_field", "cn"}, {"cert_value", "not a tenant"}}));
}

TEST_F(CertTenantTest, TokenAndCertificateMustNameTheSameTenant) {
  Start(CertTenantField::kSanUri, /*tokens=*/true);
  EXPECT_EQ(TenantOf("alice-uri", kTokenAlice), "alice");
  EXPECT_EQ(TenantOf("bob-uri", kTokenBob), "bob");

  absl::Status mixed = Status(Connect("alice-uri", kTokenBob).CreateSession());
  EXPECT_TRUE(
      FailsWith(mixed, kPermissionDenied, v1::PERMISSION_DENIED,
                {{"token_tenant", "bob"}, {"cert_tenant", "alice"}, {"cert_field", "san-uri"}}));
  EXPECT_THAT(std::string(mixed.message()), Not(HasSubstr(kTokenBob)));
  for (const auto& [key, value] : tc::MetadataOf(mixed)) {
    EXPECT_THAT(value, Not(HasSubstr(kTokenBob))) << key;
  }
  // Both credentials are required: a good certificate without a token, or a good token with
  // a certificate naming no tenant, is refused.
  EXPECT_TRUE(FailsWith(Status(Connect("alice-uri").Devices()), kUnauthenticated,
                        v1::UNAUTHENTICATED, {{"cause", "missing"}}));
  EXPECT_TRUE(FailsWith(Status(Connect("client", kTokenAlice).Devices()), kUnauthenticated,
                        v1::UNAUTHENTICATED, {{"cause", "certificate_no_tenant"}}));
  EXPECT_TRUE(FailsWith(Status(Connect("alice-uri", "cert-mallory-00000000000000").Devices()),
                        kUnauthenticated, v1::UNAUTHENTICATED, {{"cause", "unknown"}}));
}

TEST_F(CertTenantTest, TenantFromCertNeedsMutualTls) {
  for (CertTenantField field : {CertTenantField::kSanUri, CertTenantField::kCn}) {
    ServerOptions options = TestServerOptions();
    options.tls_cert_path = Path("server.pem");
    options.tls_key_path = Path("server.key");
    options.tenant_from_cert = field;
    absl::StatusOr<std::unique_ptr<TensordServer>> server = TensordServer::Start(options);
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(server.status().message()), HasSubstr("--tls-client-ca"));
    options.tls_cert_path.clear();
    options.tls_key_path.clear();
    server = TensordServer::Start(options);
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(CertTenantParseTest, TenantFromUri) {
  EXPECT_EQ(TenantFromUri("spiffe://example.org/tenant/alice"), "alice");
  EXPECT_EQ(TenantFromUri("spiffe://example.org/ns/prod/tenant/team-a.ml_1"), "team-a.ml_1");
  EXPECT_EQ(TenantFromUri("tensord://tenant/bob"), "bob");
  EXPECT_EQ(TenantFromUri("spiffe://example.org/tenant/b@d"), "b@d");  // the caller validates
  for (const char* other :
       {"spiffe://example.org/ns/prod/sa/alice", "spiffe://example.org/tenant/",
        "spiffe://example.org/tenant/alice/", "spiffe://example.org/tenants/alice",
        "spiffe://example.org/tenant/alice?x=1", "spiffe://example.org/tenant/alice#f",
        "/tenant/alice", "tenant/alice", "://tenant/alice", "spiffe://tenant", ""}) {
    EXPECT_EQ(TenantFromUri(other), "") << other;
  }
}

TEST(CertTenantParseTest, ValuesToTenant) {
  auto cause = [](CertTenantField field, const std::vector<std::string>& values) {
    absl::StatusOr<std::string> r = CertTenantFromValues(field, values);
    return r.ok() ? "tenant " + *r : GetMetadata(r.status())["cause"];
  };
  using F = CertTenantField;
  EXPECT_EQ(cause(F::kSanUri, {"spiffe://a/tenant/x", "spiffe://a/tenant/x"}), "tenant x");
  EXPECT_EQ(cause(F::kSanUri, {"https://a/b", "spiffe://a/tenant/x"}), "tenant x");
  EXPECT_EQ(cause(F::kSanUri, {}), "certificate_no_tenant");
  EXPECT_EQ(cause(F::kSanUri, {"https://a/b"}), "certificate_no_tenant");
  EXPECT_EQ(cause(F::kSanUri, {"spiffe://a/tenant/x y"}), "certificate_bad_tenant");
  EXPECT_EQ(cause(F::kSanUri, {"spiffe://a/tenant/x", "spiffe://b/tenant/y"}),
            "certificate_ambiguous");
  EXPECT_EQ(cause(F::kCn, {"svc-1"}), "tenant svc-1");
  EXPECT_EQ(cause(F::kCn, {}), "certificate_no_tenant");
  EXPECT_EQ(cause(F::kCn, {"a b"}), "certificate_bad_tenant");
  EXPECT_EQ(cause(F::kCn, {"a/b"}), "certificate_bad_tenant");
}

TEST(CertTenantParseTest, FlagSpellings) {
  CertTenantField field = CertTenantField::kNone;
  std::string error;
  for (CertTenantField f :
       {CertTenantField::kNone, CertTenantField::kSanUri, CertTenantField::kCn}) {
    ASSERT_TRUE(AbslParseFlag(AbslUnparseFlag(f), &field, &error));
    EXPECT_EQ(field, f);
  }
  EXPECT_FALSE(AbslParseFlag("uri", &field, &error));
  EXPECT_THAT(error, HasSubstr("san-uri"));
}

TEST(CertTenantParseTest, AgreementOfTokenAndCertificate) {
  EXPECT_EQ(*AgreeingTenant("alice", "alice", CertTenantField::kCn), "alice");
  absl::StatusOr<std::string> r = AgreeingTenant("alice", "bob", CertTenantField::kCn);
  EXPECT_EQ(r.status().code(), kPermissionDenied);
  EXPECT_EQ(GetReason(r.status()), Reason::kPermissionDenied);
  EXPECT_EQ(GetMetadata(r.status())["cert_field"], "cn");
}

}  // namespace
}  // namespace tensord::service_test
