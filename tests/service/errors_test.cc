// Every error reason a client can provoke, decoded from the status details by the client
// library, with its gRPC code and metadata; and the session untouched afterwards.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
constexpr absl::StatusCode kNotFound = absl::StatusCode::kNotFound;
constexpr absl::StatusCode kPrecondition = absl::StatusCode::kFailedPrecondition;
constexpr absl::StatusCode kExhausted = absl::StatusCode::kResourceExhausted;

std::string Id(uint64_t v) { return absl::StrCat(v); }

class ErrorsTest : public ServiceTest {
 protected:
  tc::Tensor PutF32(std::vector<float> v, tc::Shape shape) {
    absl::StatusOr<tc::Tensor> t = session().Put(tc::HostTensor(v, std::move(shape)));
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : tc::Tensor();
  }
  tc::SessionInfo Snapshot() {
    absl::StatusOr<tc::SessionInfo> info = session().Info();
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : tc::SessionInfo();
  }
};

TEST_F(ErrorsTest, UnknownOp) {
  tc::Tensor x = PutF32({1, 2}, {2});
  tc::SessionInfo before = Snapshot();
  absl::Status s = Status(session().Op("no_such_op", {x}));
  EXPECT_TRUE(FailsWith(s, kInvalid, v1::UNKNOWN_OP, {{"op", "no_such_op"}, {"call_index", "0"}}));
  EXPECT_TRUE(tc::BadRequestOf(s).has_value()) << "INVALID_ARGUMENT carries a BadRequest";
  // Helpers of backward rules are not part of the API.
  EXPECT_TRUE(FailsWith(Status(session().Op("batch_matmul", {x, x})), kInvalid, v1::UNKNOWN_OP));
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(ErrorsTest, WrongArity) {
  tc::Tensor x = PutF32({1, 2}, {2});
  EXPECT_TRUE(FailsWith(Status(session().Op("add", {x})), kInvalid, v1::WRONG_ARITY,
                        {{"op", "add"}, {"expected", "2"}, {"got", "1"}}));
  EXPECT_TRUE(
      FailsWith(Status(session().Op("relu", {x, x})), kInvalid, v1::WRONG_ARITY, {{"op", "relu"}}));
}

TEST_F(ErrorsTest, BadAttribute) {
  REQUIRE_OPS("sum", "mse_loss");
  tc::Tensor x = PutF32({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(FailsWith(Status(session().Op("sum", {x}, {{"dim", "rows"}})), kInvalid,
                        v1::BAD_ATTRIBUTE, {{"op", "sum"}, {"attribute", "dim"}}));
  EXPECT_TRUE(FailsWith(Status(session().Op("sum", {x}, {{"bogus", 1}})), kInvalid,
                        v1::BAD_ATTRIBUTE, {{"op", "sum"}, {"attribute", "bogus"}}));
  EXPECT_TRUE(FailsWith(Status(tc::MseLoss(x, x, "average")), kInvalid, v1::BAD_ATTRIBUTE,
                        {{"op", "mse_loss"}, {"attribute", "reduction"}}));
  EXPECT_TRUE(FailsWith(Status(tc::Sum(x, {5})), kInvalid, v1::BAD_ATTRIBUTE,
                        {{"op", "sum"}, {"attribute", "dim"}}))
      << "a dim out of range is a bad attribute value";
}

TEST_F(ErrorsTest, ShapeMismatch) {
  REQUIRE_OPS("matmul");
  tc::Tensor a = PutF32({1, 2, 3, 4, 5, 6}, {2, 3});
  tc::Tensor b = PutF32({1, 2, 3, 4}, {4});
  EXPECT_TRUE(FailsWith(Status(a + b), kInvalid, v1::SHAPE_MISMATCH, {{"op", "add"}}));
  EXPECT_TRUE(
      FailsWith(Status(tc::Matmul(a, a)), kInvalid, v1::SHAPE_MISMATCH, {{"op", "matmul"}}));
  EXPECT_TRUE(
      FailsWith(Status(tc::Reshape(a, {4, 2})), kInvalid, v1::SHAPE_MISMATCH, {{"op", "reshape"}}));
}

TEST_F(ErrorsTest, DtypeMismatch) {
  REQUIRE_OPS("matmul");
  ASSERT_OK_AND_ASSIGN(tc::Tensor i,
                       session().Put(tc::HostTensor(std::vector<int32_t>{1, 2, 3, 4}, {2, 2})));
  EXPECT_TRUE(FailsWith(Status(tc::Matmul(i, i)), kInvalid, v1::DTYPE_MISMATCH,
                        {{"op", "matmul"}, {"dtype", "i32"}}));
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  EXPECT_TRUE(
      FailsWith(Status(session().Put(tc::HostTensor(std::vector<int64_t>{1}), {true, ctx.id()})),
                kInvalid, v1::DTYPE_MISMATCH))
      << "only float tensors can require gradients";
}

TEST_F(ErrorsTest, TensorNotFound) {
  tc::Tensor x = PutF32({1}, {1});
  tc::SessionInfo before = Snapshot();
  absl::Status op = Status(session().Op("add", {x, tc::Operand::Handle(424242)}));
  EXPECT_TRUE(FailsWith(op, kNotFound, v1::TENSOR_NOT_FOUND,
                        {{"tensor_id", "424242"}, {"call_index", "0"}, {"input_index", "1"}}));
  std::optional<google::rpc::ResourceInfo> resource = tc::ResourceInfoOf(op);
  ASSERT_TRUE(resource.has_value()) << "NOT_FOUND carries a ResourceInfo";
  EXPECT_EQ(resource->resource_name(), "424242");
  EXPECT_TRUE(FailsWith(Status(session().Get(424242)), kNotFound, v1::TENSOR_NOT_FOUND,
                        {{"tensor_id", "424242"}}));
  EXPECT_TRUE(FailsWith(Status(session().Release(std::vector<uint64_t>{424242})), kNotFound,
                        v1::TENSOR_NOT_FOUND));
  // A released handle is gone for good.
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor w,
                       session().Put(tc::HostTensor(std::vector<float>{2}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor loss, tc::Sum(w * w));
  const uint64_t h = loss.handle();
  ASSERT_OK(loss.Release());
  EXPECT_TRUE(FailsWith(Status(ctx.Backward({loss})), kNotFound, v1::TENSOR_NOT_FOUND,
                        {{"tensor_id", Id(h)}, {"root_index", "0"}}));
  EXPECT_TRUE(FailsWith(Status(loss.ToHost()), kNotFound, v1::TENSOR_NOT_FOUND));
}

TEST_F(ErrorsTest, SessionNotFound) {
  const std::string unknown = "0123456789abcdef0123456789abcdef";
  absl::Status s = Status(client().AttachSession(unknown));
  EXPECT_TRUE(FailsWith(s, kNotFound, v1::SESSION_NOT_FOUND, {{"session_id", unknown}}));
  ASSERT_TRUE(tc::ResourceInfoOf(s).has_value());
  EXPECT_EQ(tc::ResourceInfoOf(s)->resource_name(), unknown);
  // Every RPC that names a session says so.
  ASSERT_OK_AND_ASSIGN(tc::Session doomed, client().CreateSession());
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, doomed.Put(tc::HostTensor(std::vector<float>{1})));
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, doomed.OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Session same, client().AttachSession(doomed.id()));
  ASSERT_OK(doomed.Close());
  auto gone = [&](const absl::Status& st) {
    return FailsWith(st, kNotFound, v1::SESSION_NOT_FOUND, {{"session_id", same.id()}});
  };
  EXPECT_TRUE(gone(Status(same.Put(tc::HostTensor(std::vector<float>{1})))));
  EXPECT_TRUE(gone(Status(same.Get(t.handle()))));
  EXPECT_TRUE(gone(Status(same.Op("add", {t, t}))));
  EXPECT_TRUE(gone(Status(same.Release(std::vector<uint64_t>{t.handle()}))));
  EXPECT_TRUE(gone(Status(same.KeepAlive())));
  EXPECT_TRUE(gone(Status(same.Info())));
  EXPECT_TRUE(gone(Status(same.OpenAutodiff())));
  EXPECT_TRUE(gone(Status(same.Close())));
}

TEST_F(ErrorsTest, ContextNotFound) {
  tc::SessionInfo before = Snapshot();
  EXPECT_TRUE(FailsWith(Status(session().Put(tc::HostTensor(std::vector<float>{1}), {true, 999})),
                        kNotFound, v1::CONTEXT_NOT_FOUND, {{"context_id", "999"}}));
  tc::OpOptions leaf;
  leaf.requires_grad = true;
  leaf.context = 999;
  EXPECT_TRUE(FailsWith(Status(session().Op1("zeros", {}, {{"shape", {1}}}, leaf)), kNotFound,
                        v1::CONTEXT_NOT_FOUND, {{"context_id", "999"}}));
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(ErrorsTest, QuotaExceeded) {
  tc::SessionOptions options;
  options.memory_quota_bytes = 1000;
  ASSERT_OK_AND_ASSIGN(tc::Session small, client().CreateSession(options));
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, small.Put(tc::HostTensor(std::vector<float>(200, 1.0f))));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo before, small.Info());
  EXPECT_EQ(before.memory_used_bytes, 800u);
  // A put, an op output and a batch's cumulative outputs each overrun the quota.
  EXPECT_TRUE(FailsWith(Status(small.Put(tc::HostTensor(std::vector<float>(100, 1.0f)))),
                        kExhausted, v1::QUOTA_EXCEEDED));
  EXPECT_TRUE(FailsWith(Status(x * 2.0), kExhausted, v1::QUOTA_EXCEEDED, {{"call_index", "0"}}));
  tc::Batch batch = small.NewBatch();
  tc::CallRef part = batch.Add("sum", {x}, {}, {});
  batch.Add("reshape", {tc::HostTensor(std::vector<float>(40, 0.0f))}, {{"shape", {4, 10}}});
  batch.Add("add", {part, tc::HostTensor(std::vector<float>(60, 0.0f))});
  EXPECT_TRUE(
      FailsWith(Status(batch.Run()), kExhausted, v1::QUOTA_EXCEEDED, {{"call_index", "2"}}));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo after, small.Info());
  EXPECT_EQ(after, before);
  // Within the quota it still works.
  ASSERT_OK_AND_ASSIGN(tc::Tensor s, tc::Sum(x));
  EXPECT_EQ(*s.Item(), 200.0);
}

TEST_F(ErrorsTest, BackwardRootNotScalar) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor w,
                       session().Put(tc::HostTensor(std::vector<float>{1, 2}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, w * 3.0);
  tc::SessionInfo before = Snapshot();
  EXPECT_TRUE(FailsWith(Status(ctx.Backward({y})), kInvalid, v1::BACKWARD_ROOT_NOT_SCALAR));
  EXPECT_EQ(Snapshot(), before);
  // A seed count that does not match the roots is malformed.
  EXPECT_TRUE(FailsWith(Status(ctx.Backward({y}, {w, w})), kInvalid, v1::INVALID_REQUEST,
                        {{"field", "seeds"}}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor seed, session().Put(tc::HostTensor(std::vector<float>{1, 1})));
  ASSERT_OK_AND_ASSIGN(tc::Gradients g, ctx.Backward({y}, {seed}));
  EXPECT_THAT(Floats(g.grad(w)), ElementsAre(3, 3));
}

TEST_F(ErrorsTest, BackwardRootNotTracked) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext other, session().OpenAutodiff());
  tc::Tensor plain = PutF32({1}, {});
  EXPECT_TRUE(
      FailsWith(Status(ctx.Backward({plain})), kPrecondition, v1::BACKWARD_ROOT_NOT_TRACKED));
  ASSERT_OK_AND_ASSIGN(tc::Tensor w,
                       session().Put(tc::HostTensor::Scalar(2.0f), {true, other.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, w * w);
  tc::SessionInfo before = Snapshot();
  EXPECT_TRUE(FailsWith(Status(ctx.Backward({y})), kPrecondition, v1::BACKWARD_ROOT_NOT_TRACKED))
      << "a root of another context";
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(ErrorsTest, GraphFreed) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor w,
                       session().Put(tc::HostTensor(std::vector<float>{1, 2}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor loss, tc::Sum(w * w));
  ASSERT_OK(ctx.Backward({loss}));
  tc::SessionInfo before = Snapshot();
  EXPECT_TRUE(FailsWith(Status(ctx.Backward({loss})), kPrecondition, v1::GRAPH_FREED));
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(ErrorsTest, SavedTensorModified) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor w,
                       session().Put(tc::HostTensor(std::vector<float>{1, 2}), {true, ctx.id()}));
  tc::Tensor v = PutF32({3, 4}, {2});
  // d(w*v)/dw needs v, which is saved; assign into the plain v is allowed while recording.
  ASSERT_OK_AND_ASSIGN(tc::Tensor loss, tc::Sum(w * v));
  ASSERT_OK(tc::Assign(v, 0.0));
  tc::SessionInfo before = Snapshot();
  EXPECT_TRUE(FailsWith(Status(ctx.Backward({loss}, {}, /*retain_graph=*/true)), kPrecondition,
                        v1::SAVED_TENSOR_MODIFIED));
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(ErrorsTest, BadOperand) {
  tc::Tensor x = PutF32({1, 2}, {2});
  tc::SessionInfo before = Snapshot();
  {
    tc::Batch b = session().NewBatch();
    b.Add("add", {x, tc::CallOutput{0, 0}});  // itself
    EXPECT_TRUE(FailsWith(Status(b.Run()), kInvalid, v1::BAD_OPERAND,
                          {{"call_index", "0"}, {"input_index", "1"}, {"operand_call", "0"}}));
  }
  {
    tc::Batch b = session().NewBatch();
    b.Add("mul", {x, 2.0});
    b.Add("add", {x, tc::CallOutput{2, 0}});  // a later call
    b.Add("neg", {x});
    EXPECT_TRUE(FailsWith(Status(b.Run()), kInvalid, v1::BAD_OPERAND,
                          {{"call_index", "1"}, {"operand_call", "2"}}));
  }
  {
    tc::Batch b = session().NewBatch();
    b.Add("neg", {x});
    b.Add("add", {x, tc::CallOutput{0, 1}});  // neg has one output
    EXPECT_TRUE(FailsWith(Status(b.Run()), kInvalid, v1::BAD_OPERAND,
                          {{"call_index", "1"}, {"operand_call", "0"}, {"operand_output", "1"}}));
  }
  EXPECT_EQ(Snapshot(), before);
  // One op records onto one context.
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext c1, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext c2, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor a,
                       session().Put(tc::HostTensor(std::vector<float>{1}), {true, c1.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b,
                       session().Put(tc::HostTensor(std::vector<float>{1}), {true, c2.id()}));
  EXPECT_TRUE(FailsWith(Status(a + b), kInvalid, v1::BAD_OPERAND, {{"op", "add"}}));
}

TEST_F(ErrorsTest, BadTensorData) {
  tc::Tensor x = PutF32({1, 2, 3}, {3});
  tc::SessionInfo before = Snapshot();
  // Three f32 elements need 12 bytes; the literal carries 8.
  tc::HostTensor bad(tc::DType::kF32, {3}, std::string(8, '\0'));
  EXPECT_TRUE(FailsWith(Status(session().Op("add", {x, bad})), kInvalid, v1::BAD_TENSOR_DATA,
                        {{"call_index", "0"}, {"input_index", "1"}, {"bytes", "8"}}));
  EXPECT_EQ(Snapshot(), before);
  // The client refuses to stream such a value at all.
  absl::Status put = Status(session().Put(bad));
  EXPECT_EQ(tc::ReasonOf(put), v1::BAD_TENSOR_DATA);
  EXPECT_EQ(tc::ErrorInfoOf(put)->domain(), "tensord.client");
}

TEST_F(ErrorsTest, DeviceNotFound) {
  tc::SessionOptions options;
  options.device = "cuda:7";
  EXPECT_TRUE(FailsWith(Status(client().CreateSession(options)), kNotFound, v1::DEVICE_NOT_FOUND,
                        {{"device", "cuda:7"}}));
  tc::PutOptions put;
  put.device = "tpu:0";
  tc::SessionInfo before = Snapshot();
  EXPECT_TRUE(FailsWith(Status(session().Put(tc::HostTensor(std::vector<float>{1}), put)),
                        kNotFound, v1::DEVICE_NOT_FOUND, {{"device", "tpu:0"}}));
  tc::Tensor x = PutF32({1}, {1});
  before = Snapshot();
  EXPECT_TRUE(FailsWith(Status(session().Op("to_device", {x}, {{"device", "cuda:9"}})), kNotFound,
                        v1::DEVICE_NOT_FOUND, {{"device", "cuda:9"}}));
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(ErrorsTest, IndexOutOfRange) {
  REQUIRE_OPS("index_select", "one_hot");
  tc::Tensor x = PutF32({1, 2, 3}, {3});
  tc::SessionInfo before = Snapshot();
  EXPECT_TRUE(
      FailsWith(Status(session().Op("index_select", {x, tc::HostTensor(std::vector<int64_t>{0, 5})},
                                    {{"dim", 0}})),
                absl::StatusCode::kOutOfRange, v1::INDEX_OUT_OF_RANGE, {{"op", "index_select"}}));
  EXPECT_TRUE(FailsWith(Status(session().Op("one_hot", {tc::HostTensor(std::vector<int64_t>{4})},
                                            {{"num_classes", 3}})),
                        absl::StatusCode::kOutOfRange, v1::INDEX_OUT_OF_RANGE,
                        {{"op", "one_hot"}}));
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(ErrorsTest, LimitExceeded) {
  tc::SessionOptions options;
  options.memory_quota_bytes = uint64_t{1} << 50;
  EXPECT_TRUE(FailsWith(Status(client().CreateSession(options)), kExhausted, v1::LIMIT_EXCEEDED,
                        {{"limit", "memory_quota_bytes"}}));
  options = {};
  options.ttl_seconds = uint64_t{1} << 40;
  EXPECT_TRUE(FailsWith(Status(client().CreateSession(options)), kExhausted, v1::LIMIT_EXCEEDED,
                        {{"limit", "ttl_seconds"}}));
}

// ---- requests the client library never sends, through the generated stub ------------------

class RawRequestTest : public ErrorsTest {
 protected:
  // Streams a put of `dtype`/`shape` whose data is `chunks`.
  absl::Status RawPut(v1::DType dtype, std::vector<int64_t> shape,
                      const std::vector<std::string>& chunks, bool header = true) {
    std::unique_ptr<v1::Tensord::Stub> stub = RawStub();
    grpc::ClientContext context;
    v1::PutTensorResponse response;
    auto writer = stub->PutTensor(&context, &response);
    v1::PutTensorRequest message;
    if (header) {
      message.mutable_header()->set_session_id(session().id());
      message.mutable_header()->set_dtype(dtype);
      for (int64_t d : shape) message.mutable_header()->add_shape(d);
      writer->Write(message);
    }
    for (const std::string& chunk : chunks) {
      message.set_chunk(chunk);
      if (!writer->Write(message)) break;
    }
    writer->WritesDone();
    return tc::FromGrpcStatus(writer->Finish());
  }
};

TEST_F(RawRequestTest, TransferIncomplete) {
  tc::SessionInfo before = Snapshot();
  // The header announces 100 floats (400 bytes); 40 arrive.
  EXPECT_TRUE(FailsWith(RawPut(v1::DTYPE_F32, {100}, {std::string(40, 'a')}), kInvalid,
                        v1::TRANSFER_INCOMPLETE,
                        {{"expected_bytes", "400"}, {"received_bytes", "40"}}));
  // More than announced.
  EXPECT_TRUE(FailsWith(RawPut(v1::DTYPE_F32, {2}, {std::string(6, 'a'), std::string(6, 'b')}),
                        kInvalid, v1::TRANSFER_INCOMPLETE, {{"expected_bytes", "8"}}));
  EXPECT_EQ(Snapshot(), before) << "nothing was stored and the reserved memory came back";
  EXPECT_OK(RawPut(v1::DTYPE_F32, {2}, {std::string(3, 'a'), std::string(5, 'b')}));
}

TEST_F(RawRequestTest, ContextNeverOpened) {
  std::unique_ptr<v1::Tensord::Stub> stub = RawStub();
  {
    grpc::ClientContext context;
    v1::CloseAutodiffContextRequest request;
    request.set_session_id(session().id());
    request.set_context_id(77);
    v1::CloseAutodiffContextResponse response;
    EXPECT_TRUE(
        FailsWith(tc::FromGrpcStatus(stub->CloseAutodiffContext(&context, request, &response)),
                  kNotFound, v1::CONTEXT_NOT_FOUND, {{"context_id", "77"}}));
  }
  {
    tc::Tensor x = PutF32({1}, {});
    grpc::ClientContext context;
    v1::BackwardRequest request;
    request.set_session_id(session().id());
    request.set_context_id(77);
    request.add_roots(x.handle());
    v1::BackwardResponse response;
    EXPECT_TRUE(FailsWith(tc::FromGrpcStatus(stub->Backward(&context, request, &response)),
                          kNotFound, v1::CONTEXT_NOT_FOUND, {{"context_id", "77"}}));
  }
}

TEST_F(RawRequestTest, InvalidRequest) {
  tc::SessionInfo before = Snapshot();
  EXPECT_TRUE(FailsWith(RawPut(v1::DTYPE_F32, {1}, {std::string(4, 'a')}, /*header=*/false),
                        kInvalid, v1::INVALID_REQUEST, {{"field", "header"}}));
  EXPECT_TRUE(FailsWith(RawPut(v1::DTYPE_UNSPECIFIED, {1}, {std::string(4, 'a')}), kInvalid,
                        v1::INVALID_REQUEST));
  std::unique_ptr<v1::Tensord::Stub> stub = RawStub();
  {
    grpc::ClientContext context;
    v1::OpenAutodiffContextRequest request;
    request.set_session_id(session().id());
    request.set_checkpointing(static_cast<v1::Checkpointing>(42));
    v1::OpenAutodiffContextResponse response;
    EXPECT_TRUE(
        FailsWith(tc::FromGrpcStatus(stub->OpenAutodiffContext(&context, request, &response)),
                  kInvalid, v1::INVALID_REQUEST, {{"field", "checkpointing"}}));
  }
  {
    grpc::ClientContext context;
    v1::ExecuteRequest request;
    request.set_session_id(session().id());
    v1::OpCall* call = request.add_calls();
    call->set_op("neg");
    call->add_inputs()->mutable_literal()->set_dtype(v1::DTYPE_UNSPECIFIED);
    v1::ExecuteResponse response;
    EXPECT_TRUE(FailsWith(tc::FromGrpcStatus(stub->Execute(&context, request, &response)), kInvalid,
                          v1::INVALID_REQUEST, {{"call_index", "0"}}));
  }
  {
    // An operand that names no source.
    grpc::ClientContext context;
    v1::ExecuteRequest request;
    request.set_session_id(session().id());
    v1::OpCall* call = request.add_calls();
    call->set_op("neg");
    call->add_inputs();
    v1::ExecuteResponse response;
    EXPECT_TRUE(FailsWith(tc::FromGrpcStatus(stub->Execute(&context, request, &response)), kInvalid,
                          v1::BAD_OPERAND, {{"call_index", "0"}}));
  }
  EXPECT_EQ(Snapshot(), before);
}

}  // namespace
}  // namespace tensord::service_test
