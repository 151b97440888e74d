// Drives an in-process tensord server through the raw generated stub: every RPC once, the
// structured error details, and atomic rollback.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/service/server.h"
#include "tensord/v1/service.grpc.pb.h"

namespace tensord {
namespace {

namespace v1 = ::tensord::v1;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

struct Details {
  google::rpc::ErrorInfo info;
  bool has_bad_request = false;
  google::rpc::BadRequest bad_request;
  bool has_resource = false;
  google::rpc::ResourceInfo resource;
};

Details Decode(const grpc::Status& status) {
  Details d;
  google::rpc::Status rpc;
  EXPECT_TRUE(rpc.ParseFromString(status.error_details())) << status.error_message();
  EXPECT_EQ(rpc.code(), status.error_code());
  for (const auto& any : rpc.details()) {
    if (any.Is<google::rpc::ErrorInfo>()) any.UnpackTo(&d.info);
    if (any.Is<google::rpc::BadRequest>()) d.has_bad_request = any.UnpackTo(&d.bad_request);
    if (any.Is<google::rpc::ResourceInfo>()) d.has_resource = any.UnpackTo(&d.resource);
  }
  EXPECT_EQ(d.info.domain(), "tensord");
  return d;
}

std::string F32Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::vector<float> F32Values(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.max_quota_bytes = int64_t{1} << 30;
    options.default_quota_bytes = int64_t{256} << 20;
    auto started = TensordServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = started->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Tensord::NewStub(channel_);
    v1::CreateSessionRequest req;
    v1::CreateSessionResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->CreateSession(&ctx, req, &resp).ok());
    session_ = resp.session_id();
  }

  grpc::Status Put(const std::vector<float>& values, const std::vector<int64_t>& shape,
                   v1::TensorInfo* out, size_t chunk = 1024, bool requires_grad = false,
                   uint64_t context = 0, int64_t extra_bytes = 0) {
    grpc::ClientContext ctx;
    v1::PutTensorResponse resp;
    auto writer = stub_->PutTensor(&ctx, &resp);
    v1::PutTensorRequest msg;
    v1::PutHeader* h = msg.mutable_header();
    h->set_session_id(session_);
    h->set_dtype(v1::DTYPE_F32);
    for (int64_t d : shape) h->add_shape(d);
    h->set_requires_grad(requires_grad);
    h->set_context_id(context);
    writer->Write(msg);
    std::string bytes = F32Bytes(values);
    if (extra_bytes < 0) bytes.resize(bytes.size() + extra_bytes);
    bytes.append(extra_bytes > 0 ? extra_bytes : 0, '\0');
    for (size_t off = 0; off < bytes.size(); off += chunk) {
      v1::PutTensorRequest c;
      c.set_chunk(bytes.substr(off, chunk));
      if (!writer->Write(c)) break;
    }
    writer->WritesDone();
    grpc::Status st = writer->Finish();
    if (out) *out = resp.tensor();
    return st;
  }

  static v1::OpCall* AddCall(v1::ExecuteRequest* req, const std::string& op,
                             std::vector<uint64_t> handles, bool fetch = false) {
    v1::OpCall* call = req->add_calls();
    call->set_op(op);
    call->set_fetch(fetch);
    for (uint64_t h : handles) call->add_inputs()->set_handle(h);
    return call;
  }

  static void AddCallOutput(v1::OpCall* call, uint32_t index, uint32_t output = 0) {
    v1::CallOutput* co = call->add_inputs()->mutable_call_output();
    co->set_call(index);
    co->set_output(output);
  }

  grpc::Status Execute(v1::ExecuteRequest req, v1::ExecuteResponse* resp) {
    req.set_session_id(session_);
    grpc::ClientContext ctx;
    return stub_->Execute(&ctx, req, resp);
  }

  v1::GetSessionInfoResponse Info() {
    v1::GetSessionInfoRequest req;
    req.set_session_id(session_);
    v1::GetSessionInfoResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->GetSessionInfo(&ctx, req, &resp).ok());
    return resp;
  }

  uint64_t OpenContext() {
    v1::OpenAutodiffContextRequest req;
    req.set_session_id(session_);
    v1::OpenAutodiffContextResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->OpenAutodiffContext(&ctx, req, &resp).ok());
    return resp.context_id();
  }

  bool HasOp(const std::string& name) {
    grpc::ClientContext ctx;
    v1::ListOpsResponse resp;
    EXPECT_TRUE(stub_->ListOps(&ctx, v1::ListOpsRequest(), &resp).ok());
    for (const auto& op : resp.ops()) {
      if (op.name() == name) return true;
    }
    return false;
  }

  static TensordServer* server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tensord::Stub> stub_;
  std::string session_;
};

TensordServer* ServerTest::server_ = nullptr;

TEST_F(ServerTest, SessionIdIsRandomHex) {
  EXPECT_EQ(session_.size(), 32u);
  EXPECT_EQ(session_.find_first_not_of("0123456789abcdef"), std::string::npos);
  grpc::ClientContext ctx;
  v1::CreateSessionResponse other;
  ASSERT_TRUE(stub_->CreateSession(&ctx, v1::CreateSessionRequest(), &other).ok());
  EXPECT_NE(other.session_id(), session_);
  EXPECT_EQ(other.device(), "cpu");
  EXPECT_TRUE(other.autodiff_enabled());
}

TEST_F(ServerTest, PutExecuteGetRoundTrip) {
  std::vector<float> x(1000);
  for (int i = 0; i < 1000; ++i) x[i] = 0.5f * i - 7;
  v1::TensorInfo a;
  ASSERT_TRUE(Put(x, {10, 100}, &a, /*chunk=*/999).ok());  // 5 chunks, one ragged
  EXPECT_EQ(a.nbytes(), 4000u);
  EXPECT_THAT(a.shape(), ElementsAre(10, 100));

  v1::ExecuteRequest req;
  AddCall(&req, "add", {a.handle(), a.handle()}, /*fetch=*/true);
  v1::ExecuteResponse resp;
  grpc::Status st = Execute(req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.results_size(), 1);
  const v1::TensorInfo& sum = resp.results(0).outputs(0);
  std::vector<float> fetched = F32Values(resp.results(0).values(0).data());
  ASSERT_EQ(fetched.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(fetched[i], 2 * x[i]);

  v1::GetTensorRequest get;
  get.set_session_id(session_);
  get.set_handle(sum.handle());
  get.set_chunk_bytes(1500);
  grpc::ClientContext ctx;
  auto reader = stub_->GetTensor(&ctx, get);
  v1::GetTensorResponse msg;
  std::string bytes;
  int messages = 0;
  while (reader->Read(&msg)) {
    EXPECT_EQ(msg.has_info(), messages == 0);
    if (messages == 0) EXPECT_EQ(msg.info().handle(), sum.handle());
    bytes += msg.chunk();
    ++messages;
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(messages, 3);
  EXPECT_EQ(F32Values(bytes), fetched);
}

TEST_F(ServerTest, BackwardThroughRequiresGradLeaf) {
  const uint64_t ctx_id = OpenContext();
  v1::TensorInfo x;
  ASSERT_TRUE(Put({1, -2, 3}, {3}, &x, 1024, /*requires_grad=*/true, ctx_id).ok());
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(x.context_id(), ctx_id);

  // loss = sum(x * x + x) → d loss / dx = 2x + 1
  v1::ExecuteRequest req;
  AddCall(&req, "mul", {x.handle(), x.handle()});
  v1::OpCall* add = AddCall(&req, "add", {});
  AddCallOutput(add, 0);
  add->add_inputs()->set_handle(x.handle());
  AddCallOutput(AddCall(&req, "sum", {}), 1);
  v1::ExecuteResponse resp;
  grpc::Status st = Execute(req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  const v1::TensorInfo& loss = resp.results(2).outputs(0);
  EXPECT_TRUE(loss.requires_grad());
  EXPECT_FALSE(loss.is_leaf());

  v1::BackwardRequest back;
  back.set_session_id(session_);
  back.set_context_id(ctx_id);
  back.add_roots(loss.handle());
  v1::BackwardResponse grads;
  grpc::ClientContext bctx;
  st = stub_->Backward(&bctx, back, &grads);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(grads.gradients_size(), 1);
  EXPECT_EQ(grads.gradients(0).leaf(), x.handle());
  EXPECT_FALSE(grads.gradients(0).grad().requires_grad());

  v1::ExecuteRequest fetch;
  fetch.set_no_grad(true);
  AddCall(&fetch, "mul", {grads.gradients(0).grad().handle()}, true)
      ->add_inputs()
      ->mutable_scalar()
      ->set_f(1.0);
  v1::ExecuteResponse fetched;
  st = Execute(fetch, &fetched);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_THAT(F32Values(fetched.results(0).values(0).data()), ElementsAre(3, -3, 7));

  // The tape was consumed: a second backward without retain_graph finds the graph freed.
  grpc::ClientContext again;
  st = stub_->Backward(&again, back, &grads);
  EXPECT_EQ(Decode(st).info.reason(), "GRAPH_FREED");
}

TEST_F(ServerTest, UnknownOpIsInvalidArgumentWithBadRequest) {
  v1::TensorInfo a;
  ASSERT_TRUE(Put({1, 2}, {2}, &a).ok());
  v1::ExecuteRequest req;
  AddCall(&req, "add", {a.handle(), a.handle()});
  AddCall(&req, "no_such_op", {a.handle()});
  v1::ExecuteResponse resp;
  grpc::Status st = Execute(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  Details d = Decode(st);
  EXPECT_EQ(d.info.reason(), "UNKNOWN_OP");
  EXPECT_EQ(d.info.metadata().at("call_index"), "1");
  EXPECT_EQ(d.info.metadata().at("op"), "no_such_op");
  ASSERT_TRUE(d.has_bad_request);
  EXPECT_EQ(d.bad_request.field_violations(0).field(), "calls[1]");
}

TEST_F(ServerTest, UnknownHandleIsTensorNotFound) {
  v1::ExecuteRequest req;
  AddCall(&req, "neg", {987654});
  v1::ExecuteResponse resp;
  grpc::Status st = Execute(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  Details d = Decode(st);
  EXPECT_EQ(d.info.reason(), "TENSOR_NOT_FOUND");
  EXPECT_EQ(d.info.metadata().at("tensor_id"), "987654");
  ASSERT_TRUE(d.has_resource);
  EXPECT_EQ(d.resource.resource_type(), "tensor");
  EXPECT_EQ(d.resource.resource_name(), "987654");
}

TEST_F(ServerTest, UnknownSessionIsSessionNotFound) {
  session_ = "00000000000000000000000000000000";
  v1::ExecuteResponse resp;
  grpc::Status st = Execute(v1::ExecuteRequest(), &resp);
  Details d = Decode(st);
  EXPECT_EQ(d.info.reason(), "SESSION_NOT_FOUND");
  EXPECT_EQ(d.resource.resource_type(), "session");
}

TEST_F(ServerTest, AssignWhileRecordingIsNotMarked) {
  if (!HasOp("assign")) GTEST_SKIP() << "assign is not registered in this build yet";
  const uint64_t ctx_id = OpenContext();
  v1::TensorInfo w, v;
  ASSERT_TRUE(Put({1, 2}, {2}, &w, 1024, true, ctx_id).ok());
  ASSERT_TRUE(Put({5, 6}, {2}, &v).ok());
  v1::ExecuteRequest req;
  AddCall(&req, "assign", {w.handle(), v.handle()});
  v1::ExecuteResponse resp;
  grpc::Status st = Execute(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  Details d = Decode(st);
  EXPECT_EQ(d.info.reason(), "OPERATION_NOT_MARKED_FOR_AUTODIFF");
  EXPECT_EQ(d.info.metadata().at("tensor_id"), absl::StrCat(w.handle()));
  EXPECT_EQ(d.info.metadata().at("context_id"), absl::StrCat(ctx_id));
  EXPECT_EQ(d.info.metadata().at("call_index"), "0");

  // The same update in a no_grad batch is the optimizer step and succeeds.
  req.set_no_grad(true);
  st = Execute(req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

TEST_F(ServerTest, AssignIsUndoneWhenALaterCallFails) {
  if (!HasOp("assign")) GTEST_SKIP() << "assign is not registered in this build yet";
  v1::TensorInfo w, v;
  ASSERT_TRUE(Put({1, 2}, {2}, &w).ok());
  ASSERT_TRUE(Put({5, 6}, {2}, &v).ok());
  v1::ExecuteRequest req;
  AddCall(&req, "assign", {w.handle(), v.handle()});
  AddCall(&req, "no_such_op", {});
  v1::ExecuteResponse resp;
  EXPECT_EQ(Decode(Execute(req, &resp)).info.metadata().at("call_index"), "1");
  v1::ExecuteRequest read;
  AddCall(&read, "neg", {w.handle()}, true);
  ASSERT_TRUE(Execute(read, &resp).ok());
  EXPECT_THAT(F32Values(resp.results(0).values(0).data()), ElementsAre(-1, -2));

  // Without the failing call the write lands in place.
  req.mutable_calls()->RemoveLast();
  ASSERT_TRUE(Execute(req, &resp).ok());
  ASSERT_TRUE(Execute(read, &resp).ok());
  EXPECT_THAT(F32Values(resp.results(0).values(0).data()), ElementsAre(-5, -6));
}

TEST_F(ServerTest, OpOnClosedContextTensorIsContextNotEnabled) {
  const uint64_t ctx_id = OpenContext();
  v1::TensorInfo x;
  ASSERT_TRUE(Put({1, 2, 3}, {3}, &x, 1024, true, ctx_id).ok());
  v1::CloseAutodiffContextRequest close;
  close.set_session_id(session_);
  close.set_context_id(ctx_id);
  v1::CloseAutodiffContextResponse closed;
  grpc::ClientContext cctx;
  ASSERT_TRUE(stub_->CloseAutodiffContext(&cctx, close, &closed).ok());

  v1::ExecuteRequest req;
  AddCall(&req, "add", {x.handle(), x.handle()});
  v1::ExecuteResponse resp;
  grpc::Status st = Execute(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  Details d = Decode(st);
  EXPECT_EQ(d.info.reason(), "AUTODIFF_CONTEXT_NOT_ENABLED");
  EXPECT_EQ(d.info.metadata().at("tensor_id"), absl::StrCat(x.handle()));
  EXPECT_EQ(d.info.metadata().at("context_id"), absl::StrCat(ctx_id));
  EXPECT_EQ(d.info.metadata().at("context_state"), "closed");

  // Its value stays readable.
  v1::GetTensorRequest get;
  get.set_session_id(session_);
  get.set_handle(x.handle());
  grpc::ClientContext gctx;
  auto reader = stub_->GetTensor(&gctx, get);
  v1::GetTensorResponse msg;
  std::string bytes;
  while (reader->Read(&msg)) bytes += msg.chunk();
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_THAT(F32Values(bytes), ElementsAre(1, 2, 3));

  // And a new leaf cannot join the closed context.
  st = Put({1}, {1}, nullptr, 1024, true, ctx_id);
  d = Decode(st);
  EXPECT_EQ(d.info.reason(), "AUTODIFF_CONTEXT_NOT_ENABLED");
  EXPECT_EQ(d.info.metadata().at("context_state"), "closed");
}

TEST_F(ServerTest, FailedBatchLeavesSessionUnchanged) {
  const uint64_t ctx_id = OpenContext();
  v1::TensorInfo x, y;
  ASSERT_TRUE(Put({1, 2, 3}, {3}, &x, 1024, true, ctx_id).ok());
  ASSERT_TRUE(Put({1, 2}, {2}, &y).ok());
  v1::GetSessionInfoResponse before = Info();

  v1::ExecuteRequest req;
  AddCall(&req, "mul", {x.handle(), x.handle()});  // recorded on the tape
  AddCallOutput(AddCall(&req, "sum", {}), 0);
  v1::OpCall* bad = AddCall(&req, "add", {x.handle(), y.handle()});  // [3] + [2]
  (void)bad;
  v1::ExecuteResponse resp;
  grpc::Status st = Execute(req, &resp);
  Details d = Decode(st);
  EXPECT_EQ(d.info.reason(), "SHAPE_MISMATCH");
  EXPECT_EQ(d.info.metadata().at("call_index"), "2");

  v1::GetSessionInfoResponse after = Info();
  EXPECT_EQ(after.tensors_size(), before.tensors_size());
  EXPECT_EQ(after.memory_used_bytes(), before.memory_used_bytes());
  ASSERT_EQ(after.contexts_size(), 1);
  EXPECT_EQ(after.contexts(0).tape_nodes(), before.contexts(0).tape_nodes());
  EXPECT_EQ(after.contexts(0).tape_nodes(), 0u);

  // Bad operands are refused the same way: a reference to the call itself.
  v1::ExecuteRequest self;
  AddCallOutput(AddCall(&self, "neg", {}), 0);
  d = Decode(Execute(self, &resp));
  EXPECT_EQ(d.info.reason(), "BAD_OPERAND");
  EXPECT_EQ(d.info.metadata().at("input_index"), "0");
  EXPECT_EQ(Info().tensors_size(), before.tensors_size());
}

TEST_F(ServerTest, PutRefusesShortLongAndOverQuotaStreams) {
  const size_t tensors = Info().tensors_size();
  Details d = Decode(Put({1, 2, 3, 4}, {4}, nullptr, 4, false, 0, /*extra_bytes=*/-4));
  EXPECT_EQ(d.info.reason(), "TRANSFER_INCOMPLETE");
  d = Decode(Put({1, 2, 3, 4}, {4}, nullptr, 4, false, 0, /*extra_bytes=*/4));
  EXPECT_EQ(d.info.reason(), "TRANSFER_INCOMPLETE");
  // 2^30 floats = 4 GiB, above the 256 MiB quota: refused before any data is sent.
  d = Decode(Put({}, {1 << 15, 1 << 15}, nullptr));
  EXPECT_EQ(d.info.reason(), "QUOTA_EXCEEDED");
  EXPECT_EQ(Info().tensors_size(), tensors);
  EXPECT_EQ(Info().memory_used_bytes(), 0u);
}

TEST_F(ServerTest, ReleaseIsAtomic) {
  v1::TensorInfo a;
  ASSERT_TRUE(Put({1}, {1}, &a).ok());
  v1::ReleaseRequest req;
  req.set_session_id(session_);
  req.add_handles(a.handle());
  req.add_handles(424242);
  v1::ReleaseResponse resp;
  grpc::ClientContext c1;
  EXPECT_EQ(Decode(stub_->Release(&c1, req, &resp)).info.reason(), "TENSOR_NOT_FOUND");
  EXPECT_EQ(Info().tensors_size(), 1);
  req.mutable_handles()->RemoveLast();
  grpc::ClientContext c2;
  ASSERT_TRUE(stub_->Release(&c2, req, &resp).ok());
  EXPECT_EQ(resp.released(), 1u);
  EXPECT_EQ(Info().tensors_size(), 0);
}

TEST_F(ServerTest, DiscoveryAndHealth) {
  grpc::ClientContext c1;
  v1::ListDevicesResponse devices;
  ASSERT_TRUE(stub_->ListDevices(&c1, v1::ListDevicesRequest(), &devices).ok());
  ASSERT_GE(devices.devices_size(), 1);
  EXPECT_EQ(devices.devices(0).name(), "cpu");

  grpc::ClientContext c2;
  v1::ListOpsResponse ops;
  ASSERT_TRUE(stub_->ListOps(&c2, v1::ListOpsRequest(), &ops).ok());
  bool found_sum = false;
  for (const v1::OpInfo& op : ops.ops()) {
    if (op.name() != "sum") continue;
    found_sum = true;
    EXPECT_EQ(op.marking(), v1::MARKING_DIFFERENTIABLE);
    // Every backend serving a device runs sum (the CPU's first).
    std::vector<std::string> kinds;
    for (const v1::DeviceInfo& d : devices.devices()) {
      if (std::find(kinds.begin(), kinds.end(), d.kind()) == kinds.end()) kinds.push_back(d.kind());
    }
    EXPECT_THAT(op.backends(), ElementsAreArray(kinds));
    EXPECT_FALSE(op.attrs().empty());
  }
  EXPECT_TRUE(found_sum);

  auto health = grpc::health::v1::Health::NewStub(channel_);
  for (const char* service : {"", "tensord.v1.Tensord"}) {
    grpc::ClientContext c;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    ASSERT_TRUE(health->Check(&c, req, &resp).ok());
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
}

// Server reflection lists the service. Debian ships no C++ reflection stubs, so the request
// (ServerReflectionRequest{list_services: ""}) is written as raw protobuf bytes.
TEST_F(ServerTest, ReflectionListsTheService) {
  grpc::GenericStub generic(channel_);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  auto wait = [&cq](intptr_t expected) {
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(reinterpret_cast<intptr_t>(tag), expected);
    return ok;
  };
  auto call = generic.PrepareCall(
      &ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(wait(1));
  grpc::Slice slice(std::string("\x3a\x00", 2));
  grpc::ByteBuffer request(&slice, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  ASSERT_TRUE(wait(2));
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  ASSERT_TRUE(wait(3));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_NE(bytes.find("tensord.v1.Tensord"), std::string::npos);
  call->WritesDone(reinterpret_cast<void*>(4));
  wait(4);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  wait(5);
  EXPECT_TRUE(status.ok()) << status.error_message();
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}

TEST(ServerLifecycleTest, IdleSessionsAreCollected) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.reap_interval_ms = 50;
  auto server = TensordServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::Tensord::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));
  v1::CreateSessionRequest create;
  create.set_ttl_seconds(1);
  v1::CreateSessionResponse session;
  grpc::ClientContext c1;
  ASSERT_TRUE(stub->CreateSession(&c1, create, &session).ok());
  EXPECT_EQ(session.ttl_seconds(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  v1::KeepAliveRequest keep;
  keep.set_session_id(session.session_id());
  v1::KeepAliveResponse kept;
  grpc::ClientContext c2;
  EXPECT_EQ(Decode(stub->KeepAlive(&c2, keep, &kept)).info.reason(), "SESSION_NOT_FOUND");
  (*server)->Shutdown();
  (*server)->Wait();
}

TEST(ServerLifecycleTest, OversizedQuotaAndUnknownDeviceAreRefused) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  auto server = TensordServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::Tensord::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));
  v1::CreateSessionRequest create;
  create.set_memory_quota_bytes(uint64_t{1} << 40);
  v1::CreateSessionResponse resp;
  grpc::ClientContext c1;
  EXPECT_EQ(Decode(stub->CreateSession(&c1, create, &resp)).info.reason(), "LIMIT_EXCEEDED");
  create.set_memory_quota_bytes(0);
  create.set_device("tpu:7");
  grpc::ClientContext c2;
  Details d = Decode(stub->CreateSession(&c2, create, &resp));
  EXPECT_EQ(d.info.reason(), "DEVICE_NOT_FOUND");
  EXPECT_EQ(d.resource.resource_type(), "device");
}

}  // namespace
}  // namespace tensord
