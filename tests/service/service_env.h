// Shared pieces of the service tests: a real TensordServer on a free loopback port, a client
// connected to it, and assertions on the decoded error details of a failed call.
#pragma once

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpp/tensord.h"
#include "grpcpp/channel.h"
#include "gtest/gtest.h"
#include "server/service/server.h"
#include "tensord/v1/service.grpc.pb.h"

namespace tensord::service_test {

namespace tc = ::tensord::client;
namespace v1 = ::tensord::v1;

inline ServerOptions TestServerOptions() {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.default_quota_bytes = int64_t{512} << 20;
  options.max_quota_bytes = int64_t{2} << 30;
  options.reap_interval_ms = 100;
  options.max_message_bytes = 64 << 20;
  return options;
}

struct ServerAndClient {
  std::unique_ptr<TensordServer> server;
  std::unique_ptr<tc::Client> client;
};

inline std::unique_ptr<ServerAndClient> StartServer(const ServerOptions& options) {
  absl::StatusOr<std::unique_ptr<TensordServer>> server = TensordServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  auto out = std::make_unique<ServerAndClient>();
  out->server = std::move(*server);
  absl::StatusOr<tc::Client> client =
      tc::Client::Connect(absl::StrCat("127.0.0.1:", out->server->port()));
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return nullptr;
  out->client = std::make_unique<tc::Client>(std::move(*client));
  return out;
}

// One server per test suite, one fresh session per test.
class ServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { env_ = StartServer(TestServerOptions()).release(); }
  static void TearDownTestSuite() {
    delete env_;
    env_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(env_, nullptr);
    absl::StatusOr<tc::Session> s = client().CreateSession();
    ASSERT_TRUE(s.ok()) << s.status();
    session_ = std::make_unique<tc::Session>(std::move(*s));
  }
  void TearDown() override { session_.reset(); }

  static tc::Client& client() { return *env_->client; }
  // The generated stub on the client's channel, for requests the library never sends.
  static std::unique_ptr<v1::Tensord::Stub> RawStub() {
    return v1::Tensord::NewStub(client().channel());
  }
  static TensordServer& server() { return *env_->server; }
  tc::Session& session() { return *session_; }

  // The named ops the test needs; a test fails (naming them) when one is not served.
  bool MissingOps(const std::vector<std::string>& ops) {
    absl::StatusOr<std::vector<tc::OpInfo>> served = client().Ops();
    EXPECT_TRUE(served.ok()) << served.status();
    if (!served.ok()) return true;
    std::set<std::string> names;
    for (const tc::OpInfo& op : *served) names.insert(op.name());
    std::vector<std::string> missing;
    for (const std::string& op : ops) {
      if (!names.count(op)) missing.push_back(op);
    }
    missing_ = absl::StrJoin(missing, ", ");
    return !missing.empty();
  }
  std::string missing_;

  static ServerAndClient* env_;
  std::unique_ptr<tc::Session> session_;
};

inline ServerAndClient* ServiceTest::env_ = nullptr;

#define REQUIRE_OPS(...)                                         \
  do {                                                           \
    if (MissingOps({__VA_ARGS__})) {                             \
      GTEST_FAIL() << "the server does not serve: " << missing_; \
    }                                                            \
  } while (0)

// A failed call of the server: the code, the reason decoded from google.rpc.ErrorInfo (domain
// "tensord"), and (optionally) metadata entries.
inline ::testing::AssertionResult FailsWith(
    const absl::Status& status, absl::StatusCode code, v1::ErrorReason reason,
    const std::map<std::string, std::string>& metadata = {}) {
  if (status.ok()) {
    return ::testing::AssertionFailure()
           << "call succeeded; expected " << v1::ErrorReason_Name(reason);
  }
  std::optional<google::rpc::ErrorInfo> info = tc::ErrorInfoOf(status);
  std::string got =
      absl::StrCat(absl::StatusCodeToString(status.code()), " ", tc::ReasonNameOf(status), " {",
                   absl::StrJoin(tc::MetadataOf(status), ", ", absl::PairFormatter("=")),
                   "}: ", status.message());
  if (status.code() != code || tc::ReasonOf(status) != reason) {
    return ::testing::AssertionFailure() << "expected " << absl::StatusCodeToString(code) << " "
                                         << v1::ErrorReason_Name(reason) << ", got " << got;
  }
  if (!info || info->domain() != "tensord") {
    return ::testing::AssertionFailure() << "not a server error (domain) : " << got;
  }
  std::map<std::string, std::string> md = tc::MetadataOf(status);
  for (const auto& [key, value] : metadata) {
    auto it = md.find(key);
    if (it == md.end() || it->second != value) {
      return ::testing::AssertionFailure()
             << "metadata " << key << "=" << value << " expected, got " << got;
    }
  }
  return ::testing::AssertionSuccess() << got;
}

// A StatusOr's status, for FailsWith(Status(x), ...).
template <typename T>
absl::Status Status(const absl::StatusOr<T>& s) {
  return s.status();
}
inline absl::Status Status(const absl::Status& s) { return s; }

#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(TENSORD_TEST_CONCAT(_sor_, __LINE__), lhs, expr)
#define TENSORD_TEST_CONCAT_INNER(a, b) a##b
#define TENSORD_TEST_CONCAT(a, b) TENSORD_TEST_CONCAT_INNER(a, b)
#define ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  ASSERT_TRUE(tmp.ok()) << tmp.status();          \
  lhs = std::move(tmp).value()
#define ASSERT_OK(expr)                                       \
  do {                                                        \
    absl::Status _st = ::tensord::service_test::Status(expr); \
    ASSERT_TRUE(_st.ok()) << _st;                             \
  } while (0)
#define EXPECT_OK(expr)                                       \
  do {                                                        \
    absl::Status _st = ::tensord::service_test::Status(expr); \
    EXPECT_TRUE(_st.ok()) << _st;                             \
  } while (0)

inline std::vector<float> Floats(const tc::Tensor& t) {
  absl::StatusOr<std::vector<float>> v = t.ToVector<float>();
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : std::vector<float>();
}

inline std::vector<double> Doubles(const tc::Tensor& t) {
  absl::StatusOr<tc::HostTensor> v = t.ToHost();
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? v->ToDoubles() : std::vector<double>();
}

}  // namespace tensord::service_test
