// Transport security and identity: TLS, mutual TLS, bearer tokens, tenant isolation of
// sessions, the sessions-per-tenant limit and session ids. Certificates are made at test time
// (scripts/make-test-certs.sh, openssl CLI) in a temporary directory.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
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
constexpr absl::StatusCode kNotFound = absl::StatusCode::kNotFound;
constexpr absl::StatusCode kUnavailable = absl::StatusCode::kUnavailable;

constexpr char kTokenA[] = "tok-alice-0123456789abcdef";
constexpr char kTokenB[] = "tok-bob-fedcba9876543210";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTestCerts("tensord_security_certs"));
    ASSERT_FALSE(dir_->empty()) << "scripts/make-test-certs.sh failed";
    std::ofstream tokens(Path("tokens.txt"));
    tokens << "# test tenants\n\n" << kTokenA << " alice\n" << kTokenB << "\tbob\n";
  }
  static void TearDownTestSuite() {
    RemoveTestCerts(*dir_);
    delete dir_;
    dir_ = nullptr;
  }

  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }
  static std::string Pem(const std::string& name) { return ReadAll(Path(name)); }

  static ServerOptions Options(bool tls, bool mtls, bool tokens) {
    ServerOptions options = TestServerOptions();
    if (tls) {
      options.tls_cert_path = Path("server.pem");
      options.tls_key_path = Path("server.key");
    }
    if (mtls) options.tls_client_ca_path = Path("ca.pem");
    if (tokens) options.auth_tokens_path = Path("tokens.txt");
    return options;
  }

  void Start(const ServerOptions& options) {
    absl::StatusOr<std::unique_ptr<TensordServer>> server = TensordServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // A client of the running server; `host` "localhost" or "127.0.0.1" (both in the SAN).
  tc::Client Connect(tc::ClientOptions options, const std::string& host = "localhost") {
    if (options.call_timeout_ms == 0) options.call_timeout_ms = 10000;
    absl::StatusOr<tc::Client> client =
        tc::Client::Connect(absl::StrCat(host, ":", server_->port()), options);
    EXPECT_TRUE(client.ok()) << client.status();
    return *std::move(client);
  }
  static tc::ClientOptions Tls(const std::string& token = "") {
    tc::ClientOptions options;
    options.root_certificates = Pem("ca.pem");
    options.auth_token = token;
    return options;
  }
  static tc::ClientOptions Plain(const std::string& token = "") {
    tc::ClientOptions options;
    options.auth_token = token;
    return options;
  }

  static std::string* dir_;
  std::unique_ptr<TensordServer> server_;
};

std::string* SecurityTest::dir_ = nullptr;

// A session, a tensor and an open autodiff context of one client, for the isolation tests.
struct Owned {
  std::unique_ptr<tc::Session> session;
  tc::Tensor x;
  uint64_t context_id = 0;
};

TEST_F(SecurityTest, TlsServesTheWholeApi) {
  Start(Options(/*tls=*/true, /*mtls=*/false, /*tokens=*/false));
  for (const std::string host : {"localhost", "127.0.0.1"}) {
    tc::Client client = Connect(Tls(), host);
    ASSERT_OK_AND_ASSIGN(bool serving, client.Health());
    EXPECT_TRUE(serving);
    ASSERT_OK_AND_ASSIGN(tc::Session session, client.CreateSession());
    ASSERT_OK_AND_ASSIGN(tc::Tensor x, session.Put(tc::HostTensor(std::vector<float>{1, 2}, {2})));
    ASSERT_OK_AND_ASSIGN(tc::Tensor y, session.Op1("add", {x, x}));
    EXPECT_EQ(Floats(y), (std::vector<float>{2, 4}));
  }
}

TEST_F(SecurityTest, PlaintextOrUntrustingClientsCannotTalkToTlsServer) {
  Start(Options(/*tls=*/true, /*mtls=*/false, /*tokens=*/false));
  tc::Client plain = Connect(Plain());
  EXPECT_EQ(Status(plain.CreateSession()).code(), kUnavailable);
  EXPECT_EQ(Status(plain.Health()).code(), kUnavailable);
  // A client that trusts another CA refuses the server's certificate.
  tc::ClientOptions rogue;
  rogue.root_certificates = Pem("rogue-ca.pem");
  EXPECT_EQ(Status(Connect(rogue).CreateSession()).code(), kUnavailable);
  // A TLS client cannot talk to a plaintext server either.
  std::unique_ptr<TensordServer> tls = std::move(server_);
  Start(Options(false, false, false));
  EXPECT_EQ(Status(Connect(Tls()).CreateSession()).code(), kUnavailable);
}

TEST_F(SecurityTest, MutualTlsNeedsAClientCertificateOfTheClientCa) {
  Start(Options(/*tls=*/true, /*mtls=*/true, /*tokens=*/false));
  EXPECT_EQ(Status(Connect(Tls()).CreateSession()).code(), kUnavailable) << "no client certificate";
  tc::ClientOptions rogue = Tls();
  rogue.client_certificate_chain = Pem("rogue-client.pem");
  rogue.client_private_key = Pem("rogue-client.key");
  EXPECT_EQ(Status(Connect(rogue).CreateSession()).code(), kUnavailable)
      << "a certificate of another CA";
  tc::ClientOptions good = Tls();
  good.client_certificate_chain = Pem("client.pem");
  good.client_private_key = Pem("client.key");
  tc::Client client = Connect(good);
  ASSERT_OK_AND_ASSIGN(tc::Session session, client.CreateSession());
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, session.Put(tc::HostTensor(std::vector<float>{3}, {1})));
  EXPECT_EQ(Floats(x), (std::vector<float>{3}));
  // Half a key pair is refused by the client before anything is sent.
  tc::ClientOptions half = Tls();
  half.client_certificate_chain = Pem("client.pem");
  EXPECT_EQ(tc::Client::Connect("localhost:1", half).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SecurityTest, TokensAreRequiredByEveryTensordCallButNotByHealth) {
  Start(Options(/*tls=*/true, /*mtls=*/false, /*tokens=*/true));
  tc::Client anonymous = Connect(Tls());
  ASSERT_OK_AND_ASSIGN(bool serving, anonymous.Health());
  EXPECT_TRUE(serving) << "health stays open for probes without tokens";
  EXPECT_TRUE(FailsWith(Status(anonymous.CreateSession()), kUnauthenticated, v1::UNAUTHENTICATED,
                        {{"cause", "missing"}}));
  EXPECT_TRUE(FailsWith(Status(anonymous.Ops()), kUnauthenticated, v1::UNAUTHENTICATED));
  EXPECT_TRUE(FailsWith(Status(anonymous.Devices()), kUnauthenticated, v1::UNAUTHENTICATED));

  const std::string wrong = "tok-mallory-0000000000000000";
  absl::Status bad = Status(Connect(Tls(wrong)).CreateSession());
  EXPECT_TRUE(FailsWith(bad, kUnauthenticated, v1::UNAUTHENTICATED, {{"cause", "unknown"}}));
  EXPECT_THAT(std::string(bad.message()), Not(HasSubstr(wrong)));
  EXPECT_THAT(std::string(bad.message()), Not(HasSubstr("mallory")));
  // A prefix of a real token is no token.
  EXPECT_TRUE(FailsWith(Status(Connect(Tls(std::string(kTokenA).substr(0, 20))).Ops()),
                        kUnauthenticated, v1::UNAUTHENTICATED, {{"cause", "unknown"}}));

  // Another scheme, or several authorization entries, through the raw stub.
  tc::Client client = Connect(Tls(kTokenA));
  auto stub = v1::Tensord::NewStub(client.channel());
  auto list_ops = [&](const std::vector<std::string>& headers) {
    grpc::ClientContext ctx;
    for (const std::string& h : headers) ctx.AddMetadata("authorization", h);
    v1::ListOpsResponse resp;
    return tc::FromGrpcStatus(stub->ListOps(&ctx, v1::ListOpsRequest(), &resp));
  };
  EXPECT_TRUE(FailsWith(list_ops({absl::StrCat("Basic ", kTokenA)}), kUnauthenticated,
                        v1::UNAUTHENTICATED, {{"cause", "malformed"}}));
  EXPECT_TRUE(FailsWith(list_ops({"Bearer"}), kUnauthenticated, v1::UNAUTHENTICATED,
                        {{"cause", "malformed"}}));
  EXPECT_TRUE(
      FailsWith(list_ops({absl::StrCat("Bearer ", kTokenA), absl::StrCat("Bearer ", kTokenB)}),
                kUnauthenticated, v1::UNAUTHENTICATED, {{"cause", "malformed"}}));
  EXPECT_OK(list_ops({absl::StrCat("bearer ", kTokenA)}));  // the scheme is case-insensitive

  ASSERT_OK_AND_ASSIGN(tc::Session session, client.CreateSession());
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, session.Put(tc::HostTensor(std::vector<float>{1, 2}, {2})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, session.Op1("mul", {x, x}));
  EXPECT_EQ(Floats(y), (std::vector<float>{1, 4}));
}

// Every RPC that names a session, called by tenant bob on `id`; each returns its status.
std::vector<std::pair<std::string, absl::Status>> CallsOn(v1::Tensord::Stub& stub,
                                                          const std::string& token,
                                                          const std::string& id, uint64_t handle,
                                                          uint64_t context, uint64_t program) {
  std::vector<std::pair<std::string, absl::Status>> out;
  auto call = [&](const std::string& name, auto&& fn) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    out.emplace_back(name, tc::FromGrpcStatus(fn(ctx)));
  };
  call("GetSessionInfo", [&](grpc::ClientContext& ctx) {
    v1::GetSessionInfoRequest req;
    req.set_session_id(id);
    v1::GetSessionInfoResponse resp;
    return stub.GetSessionInfo(&ctx, req, &resp);
  });
  call("KeepAlive", [&](grpc::ClientContext& ctx) {
    v1::KeepAliveRequest req;
    req.set_session_id(id);
    v1::KeepAliveResponse resp;
    return stub.KeepAlive(&ctx, req, &resp);
  });
  // A get streamed back, or written to shared memory region `region` when it is not empty.
  auto get = [&](grpc::ClientContext& ctx, const std::string& region) {
    v1::GetTensorRequest req;
    req.set_session_id(id);
    req.set_handle(handle);
    if (!region.empty()) req.mutable_shared_memory()->set_region(region);
    auto reader = stub.GetTensor(&ctx, req);
    v1::GetTensorResponse msg;
    while (reader->Read(&msg)) {
    }
    return reader->Finish();
  };
  // A put of one f32 streamed in a chunk, or read from region `region` when it is not empty.
  auto put = [&](grpc::ClientContext& ctx, const std::string& region) {
    v1::PutTensorResponse resp;
    auto writer = stub.PutTensor(&ctx, &resp);
    v1::PutTensorRequest msg;
    msg.mutable_header()->set_session_id(id);
    msg.mutable_header()->set_dtype(v1::DTYPE_F32);
    msg.mutable_header()->add_shape(1);
    if (!region.empty()) msg.mutable_header()->mutable_shared_memory()->set_region(region);
    writer->Write(msg);
    if (region.empty()) {
      msg.Clear();
      msg.set_chunk(std::string(4, '\0'));
      writer->Write(msg);
    }
    writer->WritesDone();
    return writer->Finish();
  };
  call("GetTensor", [&](grpc::ClientContext& ctx) { return get(ctx, ""); });
  call("PutTensor", [&](grpc::ClientContext& ctx) { return put(ctx, ""); });
  call("Execute", [&](grpc::ClientContext& ctx) {
    v1::ExecuteRequest req;
    req.set_session_id(id);
    v1::OpCall* c = req.add_calls();
    c->set_op("neg");
    c->add_inputs()->set_handle(handle);
    v1::ExecuteResponse resp;
    return stub.Execute(&ctx, req, &resp);
  });
  call("Release", [&](grpc::ClientContext& ctx) {
    v1::ReleaseRequest req;
    req.set_session_id(id);
    req.add_handles(handle);
    v1::ReleaseResponse resp;
    return stub.Release(&ctx, req, &resp);
  });
  call("OpenAutodiffContext", [&](grpc::ClientContext& ctx) {
    v1::OpenAutodiffContextRequest req;
    req.set_session_id(id);
    v1::OpenAutodiffContextResponse resp;
    return stub.OpenAutodiffContext(&ctx, req, &resp);
  });
  call("Backward", [&](grpc::ClientContext& ctx) {
    v1::BackwardRequest req;
    req.set_session_id(id);
    req.set_context_id(context);
    req.add_roots(handle);
    v1::BackwardResponse resp;
    return stub.Backward(&ctx, req, &resp);
  });
  call("CloseAutodiffContext", [&](grpc::ClientContext& ctx) {
    v1::CloseAutodiffContextRequest req;
    req.set_session_id(id);
    req.set_context_id(context);
    v1::CloseAutodiffContextResponse resp;
    return stub.CloseAutodiffContext(&ctx, req, &resp);
  });
  call("CompileProgram", [&](grpc::ClientContext& ctx) {
    v1::CompileProgramRequest req;
    req.set_session_id(id);
    v1::OpCall* c = req.add_calls();
    c->set_op("neg");
    c->add_inputs()->set_handle(handle);
    v1::CompileProgramResponse resp;
    return stub.CompileProgram(&ctx, req, &resp);
  });
  call("RunProgram", [&](grpc::ClientContext& ctx) {
    v1::RunProgramRequest req;
    req.set_session_id(id);
    req.set_program_id(program);
    v1::RunProgramResponse resp;
    return stub.RunProgram(&ctx, req, &resp);
  });
  call("ReleaseProgram", [&](grpc::ClientContext& ctx) {
    v1::ReleaseProgramRequest req;
    req.set_session_id(id);
    req.set_program_id(program);
    v1::ReleaseProgramResponse resp;
    return stub.ReleaseProgram(&ctx, req, &resp);
  });
  call("RegisterSharedMemory", [&](grpc::ClientContext& ctx) {
    v1::RegisterSharedMemoryRequest req;
    req.set_session_id(id);
    req.mutable_region()->set_name("r");
    req.mutable_region()->set_key("/tensord-security");
    req.mutable_region()->set_byte_size(64);
    v1::RegisterSharedMemoryResponse resp;
    return stub.RegisterSharedMemory(&ctx, req, &resp);
  });
  call("UnregisterSharedMemory", [&](grpc::ClientContext& ctx) {
    v1::UnregisterSharedMemoryRequest req;
    req.set_session_id(id);
    req.set_name("r");
    v1::UnregisterSharedMemoryResponse resp;
    return stub.UnregisterSharedMemory(&ctx, req, &resp);
  });
  call("GetTensor to shared memory", [&](grpc::ClientContext& ctx) { return get(ctx, "r"); });
  call("PutTensor from shared memory", [&](grpc::ClientContext& ctx) { return put(ctx, "r"); });
  call("CloseSession", [&](grpc::ClientContext& ctx) {
    v1::CloseSessionRequest req;
    req.set_session_id(id);
    v1::CloseSessionResponse resp;
    return stub.CloseSession(&ctx, req, &resp);
  });
  return out;
}

TEST_F(SecurityTest, ATenantCannotTellAnotherTenantsSessionFromNoSession) {
  Start(Options(/*tls=*/false, /*mtls=*/false, /*tokens=*/true));
  tc::Client alice = Connect(Plain(kTokenA));
  tc::Client bob = Connect(Plain(kTokenB));
  ASSERT_OK_AND_ASSIGN(tc::Session session, alice.CreateSession());
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session.OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(
      tc::Tensor x, session.Put(tc::HostTensor(std::vector<float>{1, 2}, {2}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor loss, session.Op1("sum", {x}));
  tc::ProgramBuilder builder = session.NewProgram(0, /*no_grad=*/true);
  tc::CallRef doubled = builder.Add("mul", {x, 2.0}, {}, {/*fetch=*/true});
  ASSERT_OK_AND_ASSIGN(tc::Program program, builder.Compile());
  const std::string id = session.id();
  const std::string missing(32, 'a');  // an id that never existed

  auto stub = v1::Tensord::NewStub(bob.channel());
  auto on_alices = CallsOn(*stub, kTokenB, id, x.handle(), ctx.id(), program.id());
  auto on_missing = CallsOn(*stub, kTokenB, missing, x.handle(), ctx.id(), program.id());
  ASSERT_EQ(on_alices.size(), on_missing.size());
  for (size_t i = 0; i < on_alices.size(); ++i) {
    const auto& [name, st] = on_alices[i];
    SCOPED_TRACE(name);
    EXPECT_TRUE(FailsWith(st, kNotFound, v1::SESSION_NOT_FOUND, {{"session_id", id}}));
    // The very answer a session that never existed gets, up to the id itself.
    const absl::Status& reference = on_missing[i].second;
    EXPECT_EQ(st.code(), reference.code());
    EXPECT_EQ(absl::StrReplaceAll(st.message(), {{id, "ID"}}),
              absl::StrReplaceAll(reference.message(), {{missing, "ID"}}));
    std::map<std::string, std::string> md = tc::MetadataOf(st);
    std::map<std::string, std::string> md_ref = tc::MetadataOf(reference);
    md.erase("session_id");
    md_ref.erase("session_id");
    // Each call's own id, made fresh by the server: it tells nothing of the session.
    EXPECT_EQ(md.erase("request_id"), 1u);
    EXPECT_EQ(md_ref.erase("request_id"), 1u);
    EXPECT_EQ(md, md_ref);
    auto resource = tc::ResourceInfoOf(st);
    ASSERT_TRUE(resource.has_value());
    EXPECT_EQ(resource->resource_type(), "session");
  }
  // The client library's attach says the same.
  EXPECT_TRUE(FailsWith(Status(bob.AttachSession(id)), kNotFound, v1::SESSION_NOT_FOUND));

  // Nothing bob did touched alice's session: the tensor, the context and the tape are there.
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, session.Info());
  EXPECT_EQ(info.tensors.size(), 2u);
  ASSERT_EQ(info.contexts.size(), 1u);
  EXPECT_EQ(info.contexts[0].state, "open");
  ASSERT_EQ(info.programs.size(), 1u);
  EXPECT_EQ(info.programs[0].runs, 0u);
  ASSERT_OK_AND_ASSIGN(tc::Gradients grads, ctx.Backward({loss}));
  ASSERT_TRUE(grads.contains(x));
  EXPECT_EQ(Floats(grads.grad(x)), (std::vector<float>{1, 1}));
  ASSERT_OK_AND_ASSIGN(tc::ProgramResult ran, program.Run({}));
  ASSERT_OK_AND_ASSIGN(std::vector<float> twice, ran.value(doubled).ToVector<float>());
  EXPECT_EQ(twice, (std::vector<float>{2, 4}));
  // Alice's own calls go through, and her session stays hers after she closes it.
  ASSERT_OK_AND_ASSIGN(tc::Session again, alice.AttachSession(id));
  EXPECT_EQ(again.id(), id);
}

TEST_F(SecurityTest, SessionsPerTenantAreLimited) {
  ServerOptions options = Options(false, false, /*tokens=*/true);
  options.max_sessions_per_tenant = 2;
  Start(options);
  tc::Client alice = Connect(Plain(kTokenA));
  tc::Client bob = Connect(Plain(kTokenB));
  ASSERT_OK_AND_ASSIGN(tc::Session a1, alice.CreateSession());
  ASSERT_OK_AND_ASSIGN(tc::Session a2, alice.CreateSession());
  absl::Status third = Status(alice.CreateSession());
  EXPECT_TRUE(
      FailsWith(third, absl::StatusCode::kResourceExhausted, v1::LIMIT_EXCEEDED,
                {{"limit", "max_sessions_per_tenant"}, {"value", "2"}, {"tenant", "alice"}}));
  EXPECT_THAT(std::string(third.message()), HasSubstr("2"));
  // The limit is per tenant: bob is not affected by alice's sessions.
  ASSERT_OK_AND_ASSIGN(tc::Session b1, bob.CreateSession());
  // Closing one frees a place.
  ASSERT_OK(a1.Close());
  ASSERT_OK_AND_ASSIGN(tc::Session a3, alice.CreateSession());
  EXPECT_TRUE(FailsWith(Status(alice.CreateSession()), absl::StatusCode::kResourceExhausted,
                        v1::LIMIT_EXCEEDED));
}

TEST_F(SecurityTest, ExpiredSessionsFreeTheirPlace) {
  ServerOptions options = Options(false, false, /*tokens=*/true);
  options.max_sessions_per_tenant = 1;
  Start(options);
  tc::Client alice = Connect(Plain(kTokenA));
  tc::SessionOptions short_lived;
  short_lived.ttl_seconds = 1;
  ASSERT_OK_AND_ASSIGN(tc::Session s, alice.CreateSession(short_lived));
  s.Detach();
  EXPECT_TRUE(FailsWith(Status(alice.CreateSession()), absl::StatusCode::kResourceExhausted,
                        v1::LIMIT_EXCEEDED));
  // The reaper (every 100 ms here) collects the idle session and its tenant's count drops.
  absl::Status created = Status(alice.CreateSession(short_lived));
  for (int i = 0; i < 60 && !created.ok(); ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    created = Status(alice.CreateSession(short_lived));
  }
  EXPECT_OK(created);
}

TEST_F(SecurityTest, AnonymousCallersShareOneTenantWithTheLimit) {
  ServerOptions options = Options(false, false, false);
  options.max_sessions_per_tenant = 1;
  Start(options);
  tc::Client one = Connect(Plain());
  tc::Client two = Connect(Plain());
  ASSERT_OK_AND_ASSIGN(tc::Session s, one.CreateSession());
  EXPECT_TRUE(FailsWith(Status(two.CreateSession()), absl::StatusCode::kResourceExhausted,
                        v1::LIMIT_EXCEEDED, {{"tenant", kAnonymousTenant}}));
  // Without tokens the session id is the only key: anyone holding it may use the session.
  ASSERT_OK_AND_ASSIGN(tc::Session attached, two.AttachSession(s.id()));
  EXPECT_EQ(attached.id(), s.id());
}

TEST_F(SecurityTest, SessionIdsAre128RandomBitsInHex) {
  ServerOptions options = Options(false, false, false);
  options.max_sessions_per_tenant = 0;
  Start(options);
  tc::Client client = Connect(Plain());
  std::set<std::string> ids;
  std::vector<tc::Session> sessions;
  const std::regex hex32("[0-9a-f]{32}");
  for (int i = 0; i < 100; ++i) {
    ASSERT_OK_AND_ASSIGN(tc::Session s, client.CreateSession());
    EXPECT_TRUE(std::regex_match(s.id(), hex32)) << s.id();
    ids.insert(s.id());
    sessions.push_back(std::move(s));
  }
  EXPECT_EQ(ids.size(), 100u);
  // Random, not sequential: across 100 ids every hex digit position takes several values.
  for (size_t pos = 0; pos < 32; ++pos) {
    std::set<char> digits;
    for (const std::string& id : ids) digits.insert(id[pos]);
    EXPECT_GE(digits.size(), 4u) << "position " << pos;
  }
}

TEST_F(SecurityTest, BadSecurityOptionsFailStart) {
  auto start_fails = [](const ServerOptions& options, const std::string& needle) {
    absl::StatusOr<std::unique_ptr<TensordServer>> server = TensordServer::Start(options);
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << needle;
    EXPECT_THAT(std::string(server.status().message()), HasSubstr(needle));
  };
  ServerOptions o = Options(true, false, false);
  o.tls_key_path.clear();
  start_fails(o, "--tls-key");
  o = Options(false, false, false);
  o.tls_client_ca_path = Path("ca.pem");
  start_fails(o, "--tls-cert");
  o = Options(true, false, false);
  o.tls_cert_path = Path("nope.pem");
  start_fails(o, "nope.pem");
  o = Options(true, false, false);
  o.tls_cert_path = Path("tokens.txt");
  start_fails(o, "not PEM");
  o = Options(true, false, false);
  o.tls_key_path = Path("client.key");  // not the key of server.pem
  absl::StatusOr<std::unique_ptr<TensordServer>> mismatched = TensordServer::Start(o);
  EXPECT_FALSE(mismatched.ok());
  EXPECT_THAT(std::string(mismatched.status().message()), HasSubstr("does not belong"));
  o = Options(false, false, true);
  o.auth_tokens_path = Path("no-tokens.txt");
  start_fails(o, "no-tokens.txt");
  std::ofstream(Path("short-tokens.txt")) << "short alice\n";
  o.auth_tokens_path = Path("short-tokens.txt");
  start_fails(o, "line 1");
}

TEST(TokenTableTest, ParsesTheFileFormat) {
  absl::StatusOr<TokenTable> t = TokenTable::Parse(
      "# comment\n\n  0123456789abcdef0  alice  \n\t# indented comment\nABCDEFGHIJKLMNOPQ\tbob\n"
      "ZZZZZZZZZZZZZZZZZZ alice\n",
      "test");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), 3u);
  EXPECT_EQ(t->Lookup("0123456789abcdef0"), "alice");
  EXPECT_EQ(t->Lookup("ABCDEFGHIJKLMNOPQ"), "bob");
  EXPECT_EQ(t->Lookup("ZZZZZZZZZZZZZZZZZZ"), "alice");
  EXPECT_EQ(t->Lookup("0123456789abcdef"), "");    // a prefix
  EXPECT_EQ(t->Lookup("0123456789abcdef01"), "");  // longer
  EXPECT_EQ(t->Lookup(""), "");

  auto fails = [](const std::string& text, const std::string& needle) {
    absl::StatusOr<TokenTable> bad = TokenTable::Parse(text, "tokens");
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr(needle)) << text;
    // Errors name the line, never the token.
    EXPECT_THAT(std::string(bad.status().message()), Not(HasSubstr("secret")));
  };
  fails("# nothing\n", "holds no token");
  fails("secret-0123456789abcdef\n", "line 1: expected 'TOKEN TENANT'");
  fails("secret-0123456789abcdef alice extra\n", "3 fields");
  fails("#\nsecret alice\n", "line 2");
  fails("secret-0123456789abcdef al/ice\n", "al/ice");
  fails("secret-0123456789abcdef alice\nsecret-0123456789abcdef bob\n", "line 2");
}

TEST(TokenTableTest, HeaderForms) {
  absl::StatusOr<TokenTable> t = TokenTable::Parse("0123456789abcdef0 alice\n", "test");
  ASSERT_TRUE(t.ok());
  auto tenant = [&](const char* header) {
    std::string h = header;
    absl::StatusOr<std::string> r = AuthenticateHeader(*t, &h);
    return r.ok() ? *r : std::string(ReasonName(GetReason(r.status())));
  };
  EXPECT_EQ(tenant("Bearer 0123456789abcdef0"), "alice");
  EXPECT_EQ(tenant("BEARER   0123456789abcdef0 "), "alice");
  EXPECT_EQ(tenant("Bearer 0123456789abcdef1"), "UNAUTHENTICATED");
  EXPECT_EQ(tenant("0123456789abcdef0"), "UNAUTHENTICATED");
  EXPECT_EQ(GetMetadata(AuthenticateHeader(*t, nullptr).status()).at("cause"), "missing");
}

}  // namespace
}  // namespace tensord::service_test
