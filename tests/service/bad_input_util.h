// Shared by the bad-input tables (bad_input_calls_test.cc, bad_input_state_test.cc):
// malformed and hostile requests, sent as raw protos through the generated stub (most of them
// the client library would refuse to build). Each row names the exact gRPC code and reason;
// after each, the server still answers and the session's tensors are exactly as before.
// The two tables hold more than 40 rows together.
#pragma once
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {  // test-only: each test executable includes this header once

using Code = absl::StatusCode;

// Small limits, so every limit row is cheap to provoke.
ServerOptions LimitedOptions() {
  ServerOptions o = TestServerOptions();
  o.max_message_bytes = 4 << 20;
  o.max_tensor_bytes = 64 << 20;
  o.max_rank = 8;
  o.max_dim = 1 << 20;
  o.max_calls_per_batch = 100;
  o.max_contexts_per_session = 4;
  return o;
}

std::string F32Bytes(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// What a row may use: the session's tensors and contexts, and another session's.
struct Fixture {
  std::string session;
  uint64_t x = 0;         // f32 [2, 3]
  uint64_t y = 0;         // f32 [3]
  uint64_t ints = 0;      // i64 [2]
  uint64_t w = 0;         // f32 [3], requires grad in `ctx`
  uint64_t wv = 0;        // w * 2: f32 [3] recorded on `ctx`
  uint64_t released = 0;  // put, then released
  uint64_t ctx = 0;       // open
  uint64_t closed_ctx = 0;
  std::string other_session;
  uint64_t other_handle = 0;  // a handle only the other session has
  uint64_t other_ctx = 0;     // a context id only the other session has
  v1::Tensord::Stub* stub = nullptr;
  tc::Client* client = nullptr;
};

// ---- request builders ------------------------------------------------------------------

v1::ExecuteRequest Batch(const Fixture& f) {
  v1::ExecuteRequest r;
  r.set_session_id(f.session);
  return r;
}
v1::OpCall* Call(v1::ExecuteRequest& r, const std::string& op) {
  v1::OpCall* c = r.add_calls();
  c->set_op(op);
  return c;
}
void Handle(v1::OpCall* c, uint64_t h) { c->add_inputs()->set_handle(h); }
void Output(v1::OpCall* c, uint32_t call, uint32_t output) {
  v1::CallOutput* o = c->add_inputs()->mutable_call_output();
  o->set_call(call);
  o->set_output(output);
}
void Literal(v1::OpCall* c, int dtype, std::vector<int64_t> shape, std::string data) {
  v1::TensorData* t = c->add_inputs()->mutable_literal();
  t->set_dtype(static_cast<v1::DType>(dtype));
  for (int64_t d : shape) t->add_shape(d);
  t->set_data(std::move(data));
}
v1::AttrValue& Attr(v1::OpCall* c, const std::string& name) { return (*c->mutable_attrs())[name]; }
void Ints(v1::OpCall* c, const std::string& name, std::vector<int64_t> v) {
  v1::IntList* list = Attr(c, name).mutable_ints();
  for (int64_t d : v) list->add_values(d);
}

absl::Status Send(const Fixture& f, const v1::ExecuteRequest& r) {
  grpc::ClientContext context;
  v1::ExecuteResponse response;
  return tc::FromGrpcStatus(f.stub->Execute(&context, r, &response));
}

// A one-call batch: `op` on the given handles, `edit` adjusts the call.
absl::Status One(const Fixture& f, const std::string& op, std::vector<uint64_t> handles,
                 const std::function<void(v1::OpCall*)>& edit = nullptr) {
  v1::ExecuteRequest r = Batch(f);
  v1::OpCall* c = Call(r, op);
  for (uint64_t h : handles) Handle(c, h);
  if (edit) edit(c);
  return Send(f, r);
}

struct PutPart {
  bool header = false;
  std::string chunk;
};
v1::PutHeader Header(const Fixture& f, int dtype, std::vector<int64_t> shape) {
  v1::PutHeader h;
  h.set_session_id(f.session);
  h.set_dtype(static_cast<v1::DType>(dtype));
  for (int64_t d : shape) h.add_shape(d);
  return h;
}
// Streams `header` (unless `with_header` is false) and then `chunks`.
absl::Status Put(const Fixture& f, const v1::PutHeader& header, std::vector<std::string> chunks,
                 bool with_header = true, bool second_header = false) {
  grpc::ClientContext context;
  v1::PutTensorResponse response;
  auto writer = f.stub->PutTensor(&context, &response);
  v1::PutTensorRequest m;
  bool open = true;
  if (with_header) {
    *m.mutable_header() = header;
    open = writer->Write(m);
  }
  for (const std::string& chunk : chunks) {
    if (!open) break;
    m.set_chunk(chunk);
    open = writer->Write(m);
  }
  if (open && second_header) {
    *m.mutable_header() = header;
    open = writer->Write(m);
  }
  if (open) writer->WritesDone();
  return tc::FromGrpcStatus(writer->Finish());
}

// Downloads `handle` into `bytes` (may be null).
absl::Status Get(const Fixture& f, uint64_t handle, std::string* bytes) {
  grpc::ClientContext context;
  v1::GetTensorRequest r;
  r.set_session_id(f.session);
  r.set_handle(handle);
  auto reader = f.stub->GetTensor(&context, r);
  v1::GetTensorResponse m;
  while (reader->Read(&m)) {
    if (bytes != nullptr) bytes->append(m.chunk());
  }
  return tc::FromGrpcStatus(reader->Finish());
}

absl::Status Backward(const Fixture& f, uint64_t ctx, std::vector<uint64_t> roots,
                      std::vector<uint64_t> seeds = {}) {
  grpc::ClientContext context;
  v1::BackwardRequest r;
  r.set_session_id(f.session);
  r.set_context_id(ctx);
  for (uint64_t h : roots) r.add_roots(h);
  for (uint64_t h : seeds) r.add_seeds(h);
  v1::BackwardResponse response;
  return tc::FromGrpcStatus(f.stub->Backward(&context, r, &response));
}

// ---- the table ---------------------------------------------------------------------------

struct Row {
  const char* name;
  std::function<absl::Status(const Fixture&)> send;
  Code code;
  v1::ErrorReason reason;
  std::map<std::string, std::string> metadata;
};

void PrintTo(const Row& row, std::ostream* os) { *os << row.name; }

constexpr Code kInvalid = Code::kInvalidArgument;
constexpr Code kNotFound = Code::kNotFound;
constexpr Code kPrecondition = Code::kFailedPrecondition;
constexpr Code kExhausted = Code::kResourceExhausted;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

class BadInputTest : public ServiceTest, public ::testing::WithParamInterface<Row> {
 protected:
  static void SetUpTestSuite() { env_ = StartServer(LimitedOptions()).release(); }

  void SetUp() override {
    ServiceTest::SetUp();
    stub_ = RawStub();
    f_.session = session().id();
    f_.stub = stub_.get();
    f_.client = &client();
    ASSERT_OK_AND_ASSIGN(
        x_, session().Put(tc::HostTensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3})));
    ASSERT_OK_AND_ASSIGN(y_, session().Put(tc::HostTensor(std::vector<float>{7, 8, 9})));
    ASSERT_OK_AND_ASSIGN(ints_, session().Put(tc::HostTensor(std::vector<int64_t>{0, 9})));
    ASSERT_OK_AND_ASSIGN(tc::AutodiffContext closed, session().OpenAutodiff());
    ASSERT_OK(closed.Close());
    ASSERT_OK_AND_ASSIGN(ctx_, session().OpenAutodiff());
    ASSERT_OK_AND_ASSIGN(
        w_, session().Put(tc::HostTensor(std::vector<float>{1, -2, 3}), {true, ctx_->id()}));
    ASSERT_OK_AND_ASSIGN(std::vector<tc::Tensor> wv, session().Op("mul", {w_, 2.0}));
    wv_ = wv[0];
    ASSERT_OK_AND_ASSIGN(tc::Tensor released, session().Put(tc::HostTensor(std::vector<float>{0})));
    f_.released = released.handle();
    ASSERT_OK(session().Release(std::vector<tc::Tensor>{released}));
    f_.x = x_.handle();
    f_.y = y_.handle();
    f_.ints = ints_.handle();
    f_.w = w_.handle();
    f_.wv = wv_.handle();
    f_.ctx = ctx_->id();
    f_.closed_ctx = closed.id();

    // Another session with more handles and contexts than this one.
    ASSERT_OK_AND_ASSIGN(tc::Session other, client().CreateSession());
    other_ = std::make_unique<tc::Session>(std::move(other));
    for (int i = 0; i < 12; ++i) {
      ASSERT_OK_AND_ASSIGN(tc::Tensor t, other_->Put(tc::HostTensor(std::vector<float>{1})));
      f_.other_handle = t.handle();
      other_tensors_.push_back(t);
    }
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK_AND_ASSIGN(tc::AutodiffContext c, other_->OpenAutodiff());
      f_.other_ctx = c.id();
      other_contexts_.push_back(std::move(c));
    }
  }
  void TearDown() override {
    ctx_.reset();
    x_ = y_ = ints_ = w_ = wv_ = tc::Tensor();
    other_tensors_.clear();
    other_contexts_.clear();
    other_.reset();
    ServiceTest::TearDown();
  }

  // Handles with dtype and shape, and every tensor's values.
  std::string State() {
    grpc::ClientContext context;
    v1::GetSessionInfoRequest r;
    r.set_session_id(f_.session);
    v1::GetSessionInfoResponse info;
    grpc::Status s = stub_->GetSessionInfo(&context, r, &info);
    if (!s.ok()) return "GetSessionInfo failed: " + s.error_message();
    std::string out = absl::StrCat("used=", info.memory_used_bytes(), "\n");
    // Raw bytes through the stub: the client library could flush queued releases meanwhile.
    for (const v1::TensorInfo& t : info.tensors()) {
      std::string bytes;
      absl::Status got = Get(f_, t.handle(), &bytes);
      absl::StrAppend(&out, t.handle(), " ", t.dtype(), " [", absl::StrJoin(t.shape(), ","), "] ",
                      got.ok() ? absl::CHexEscape(bytes) : got.ToString(), "\n");
    }
    return out;
  }

  // Sends the row's request and checks its error, that the session is unchanged and that its
  // autodiff graph still works.
  void Check(const Row& row) {
    const std::string before = State();
    absl::Status s = row.send(f_);
    EXPECT_TRUE(FailsWith(s, row.code, row.reason, row.metadata));
    // The server answers, and the session holds exactly what it held.
    EXPECT_EQ(State(), before);
    // A backward that failed consumed no graph: the tape still gives w's gradient.
    ASSERT_OK_AND_ASSIGN(std::vector<tc::Tensor> sum, session().Op("sum", {wv_}));
    ASSERT_OK_AND_ASSIGN(tc::Gradients g, ctx_->Backward({sum[0]}));
    EXPECT_EQ(Floats(g.grad(w_)), (std::vector<float>{2, 2, 2}));
  }

  Fixture f_;
  std::unique_ptr<v1::Tensord::Stub> stub_;
  tc::Tensor x_, y_, ints_, w_, wv_;
  std::optional<tc::AutodiffContext> ctx_;
  std::unique_ptr<tc::Session> other_;
  std::vector<tc::Tensor> other_tensors_;
  std::vector<tc::AutodiffContext> other_contexts_;
};

}  // namespace
}  // namespace tensord::service_test
