// Bad input, part 2: handles, sessions and contexts that are not the caller's or no longer
// exist, batch and message sizes, streamed puts, backward and downloads. See bad_input_util.h.
#include "tests/service/bad_input_util.h"

namespace tensord::service_test {
namespace {

const std::vector<Row>& Rows() {
  static const auto* rows = new std::vector<Row>{
      // -- handles, sessions, contexts
      {"ReleasedHandle", [](const Fixture& f) { return One(f, "neg", {f.released}); }, kNotFound,
       v1::TENSOR_NOT_FOUND},
      {"HandleZero",
       [](const Fixture& f) { return One(f, "neg", {0}); },
       kNotFound,
       v1::TENSOR_NOT_FOUND,
       {{"tensor_id", "0"}}},
      {"AnotherSessionsHandle", [](const Fixture& f) { return One(f, "neg", {f.other_handle}); },
       kNotFound, v1::TENSOR_NOT_FOUND},
      {"UnknownSession",
       [](const Fixture& f) {
         Fixture g = f;
         g.session = "00000000000000000000000000000000";
         return One(g, "neg", {f.x});
       },
       kNotFound, v1::SESSION_NOT_FOUND},
      {"EmptySessionId",
       [](const Fixture& f) {
         Fixture g = f;
         g.session.clear();
         return One(g, "neg", {f.x});
       },
       kNotFound, v1::SESSION_NOT_FOUND},
      {"RequiresGradInClosedContext",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         r.set_context_id(f.closed_ctx);
         Handle(Call(r, "neg"), f.x);
         r.mutable_calls(0)->set_requires_grad(true);
         return Send(f, r);
       },
       kPrecondition,
       v1::AUTODIFF_CONTEXT_NOT_ENABLED,
       {{"context_state", "closed"}}},
      {"RequiresGradInAnotherSessionsContext",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         r.set_context_id(f.other_ctx);
         Handle(Call(r, "neg"), f.x);
         r.mutable_calls(0)->set_requires_grad(true);
         return Send(f, r);
       },
       kNotFound, v1::CONTEXT_NOT_FOUND},
      {"RequiresGradWithoutContext",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Handle(Call(r, "neg"), f.x);
         r.mutable_calls(0)->set_requires_grad(true);
         return Send(f, r);
       },
       kInvalid,
       v1::INVALID_REQUEST,
       {{"context_id", "0"}}},
      {"RequiresGradOnIntegers",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         r.set_context_id(f.ctx);
         Handle(Call(r, "neg"), f.ints);
         r.mutable_calls(0)->set_requires_grad(true);
         return Send(f, r);
       },
       kInvalid, v1::DTYPE_MISMATCH},
      {"AssignIntoAutodiffTensorWhileRecording",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         r.set_context_id(f.ctx);
         Handle(Call(r, "assign"), f.w);
         Handle(r.mutable_calls(0), f.y);
         return Send(f, r);
       },
       kPrecondition,
       v1::OPERATION_NOT_MARKED_FOR_AUTODIFF,
       {{"op", "assign"}}},
      // -- batch and message size
      {"EnormousBatch",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         for (int k = 0; k < 101; ++k) Handle(Call(r, "neg"), f.x);
         return Send(f, r);
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "max_calls_per_batch"}, {"value", "101"}, {"max", "100"}}},
      {"RequestOverMaxMessageBytes",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Literal(Call(r, "neg"), v1::DTYPE_F32, {5 << 18}, std::string(5 << 20, '\0'));
         return Send(f, r);
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "max_message_bytes"}, {"max", "4194304"}}},
      {"FetchOverMessageLimit",
       [](const Fixture& f) {
         return One(f, "zeros", {}, [](v1::OpCall* c) {
           Ints(c, "shape", {1 << 20});
           c->set_fetch(true);
         });
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "fetch_bytes"}}},
      // -- streamed puts
      {"PutWithoutHeader",
       [](const Fixture& f) {
         return Put(f, Header(f, v1::DTYPE_F32, {1}), {std::string(4, 'a')}, false);
       },
       kInvalid,
       v1::INVALID_REQUEST,
       {{"field", "header"}}},
      {"PutUnknownDtype",
       [](const Fixture& f) { return Put(f, Header(f, 42, {1}), {std::string(4, 'a')}); },
       kInvalid,
       v1::INVALID_REQUEST,
       {{"value", "42"}}},
      {"PutTruncated",
       [](const Fixture& f) {
         return Put(f, Header(f, v1::DTYPE_F32, {100}), {std::string(40, 'a')});
       },
       kInvalid,
       v1::TRANSFER_INCOMPLETE,
       {{"expected_bytes", "400"}, {"received_bytes", "40"}}},
      {"PutOverlong",
       [](const Fixture& f) {
         return Put(f, Header(f, v1::DTYPE_F32, {2}), {std::string(6, 'a'), std::string(6, 'b')});
       },
       kInvalid,
       v1::TRANSFER_INCOMPLETE,
       {{"expected_bytes", "8"}}},
      {"PutSecondHeader",
       [](const Fixture& f) {
         return Put(f, Header(f, v1::DTYPE_F32, {2}), {std::string(4, 'a')}, true, true);
       },
       kInvalid,
       v1::INVALID_REQUEST,
       {{"field", "header"}}},
      {"PutNegativeDim",
       [](const Fixture& f) { return Put(f, Header(f, v1::DTYPE_F32, {-4}), {}); }, kInvalid,
       v1::SHAPE_MISMATCH},
      {"PutOverMaxRank",
       [](const Fixture& f) {
         return Put(f, Header(f, v1::DTYPE_F32, std::vector<int64_t>(12, 1)),
                    {std::string(4, 'a')});
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "max_rank"}, {"value", "12"}}},
      {"PutOverMaxTensorBytes",
       [](const Fixture& f) {
         return Put(f, Header(f, v1::DTYPE_F64, {1 << 20, 16}), {});
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "max_tensor_bytes"}, {"value", "134217728"}}},
      {"PutElementCountOverflow",
       [](const Fixture& f) {
         return Put(f, Header(f, v1::DTYPE_I64, {1 << 20, 1 << 20, 1 << 20, 1 << 20}), {});
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "element_count"}}},
      {"PutChunkOverMaxMessageBytes",
       [](const Fixture& f) {
         return Put(f, Header(f, v1::DTYPE_F32, {1 << 20, 2}), {std::string(5 << 20, 'a')});
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "max_message_bytes"}}},
      {"PutUnknownDevice",
       [](const Fixture& f) {
         v1::PutHeader h = Header(f, v1::DTYPE_F32, {1});
         h.set_device("tpu:0");
         return Put(f, h, {std::string(4, 'a')});
       },
       kNotFound, v1::DEVICE_NOT_FOUND},
      {"PutRequiresGradInClosedContext",
       [](const Fixture& f) {
         v1::PutHeader h = Header(f, v1::DTYPE_F32, {1});
         h.set_requires_grad(true);
         h.set_context_id(f.closed_ctx);
         return Put(f, h, {std::string(4, 'a')});
       },
       kPrecondition,
       v1::AUTODIFF_CONTEXT_NOT_ENABLED,
       {{"context_state", "closed"}}},
      // -- autodiff contexts and backward
      {"UnknownCheckpointing",
       [](const Fixture& f) {
         grpc::ClientContext context;
         v1::OpenAutodiffContextRequest r;
         r.set_session_id(f.session);
         r.set_checkpointing(static_cast<v1::Checkpointing>(42));
         v1::OpenAutodiffContextResponse response;
         return tc::FromGrpcStatus(f.stub->OpenAutodiffContext(&context, r, &response));
       },
       kInvalid,
       v1::INVALID_REQUEST,
       {{"field", "checkpointing"}}},
      {"TooManyOpenContexts",
       [](const Fixture& f) -> absl::Status {
         // One is open already; the limit is 4.
         for (int i = 0; i < 4; ++i) {
           grpc::ClientContext context;
           v1::OpenAutodiffContextRequest r;
           r.set_session_id(f.session);
           v1::OpenAutodiffContextResponse response;
           absl::Status s = tc::FromGrpcStatus(f.stub->OpenAutodiffContext(&context, r, &response));
           if (!s.ok()) return s;
         }
         return absl::OkStatus();
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "max_contexts_per_session"}, {"value", "5"}, {"max", "4"}}},
      {"CloseUnknownContext",
       [](const Fixture& f) {
         grpc::ClientContext context;
         v1::CloseAutodiffContextRequest r;
         r.set_session_id(f.session);
         r.set_context_id(f.other_ctx);
         v1::CloseAutodiffContextResponse response;
         return tc::FromGrpcStatus(f.stub->CloseAutodiffContext(&context, r, &response));
       },
       kNotFound, v1::CONTEXT_NOT_FOUND},
      {"BackwardNonScalarRootWithoutSeed",
       [](const Fixture& f) { return Backward(f, f.ctx, {f.wv}); },
       kInvalid,
       v1::BACKWARD_ROOT_NOT_SCALAR,
       {{"root_index", "0"}}},
      {"BackwardSeedOfWrongShape",
       [](const Fixture& f) { return Backward(f, f.ctx, {f.wv}, {f.x}); }, kInvalid,
       v1::SHAPE_MISMATCH},
      {"BackwardSeedCountMismatch",
       [](const Fixture& f) {
         return Backward(f, f.ctx, {f.wv}, {f.y, f.y});
       },
       kInvalid,
       v1::INVALID_REQUEST,
       {{"field", "seeds"}}},
      {"BackwardWithoutRoots",
       [](const Fixture& f) { return Backward(f, f.ctx, {}); },
       kInvalid,
       v1::INVALID_REQUEST,
       {{"field", "roots"}}},
      {"BackwardPlainRoot", [](const Fixture& f) { return Backward(f, f.ctx, {f.x}, {f.x}); },
       kPrecondition, v1::BACKWARD_ROOT_NOT_TRACKED},
      {"BackwardReleasedRoot",
       [](const Fixture& f) { return Backward(f, f.ctx, {f.released}); },
       kNotFound,
       v1::TENSOR_NOT_FOUND,
       {{"root_index", "0"}}},
      {"BackwardOnClosedContext",
       [](const Fixture& f) { return Backward(f, f.closed_ctx, {f.wv}, {f.y}); },
       kPrecondition,
       v1::AUTODIFF_CONTEXT_NOT_ENABLED,
       {{"context_state", "closed"}}},
      {"BackwardOnAnotherSessionsContext",
       [](const Fixture& f) { return Backward(f, f.other_ctx, {f.wv}, {f.y}); }, kNotFound,
       v1::CONTEXT_NOT_FOUND},
      // -- downloads and releases
      {"GetReleasedHandle", [](const Fixture& f) { return Get(f, f.released, nullptr); }, kNotFound,
       v1::TENSOR_NOT_FOUND},
      {"ReleaseUnknownAmongKnown",
       [](const Fixture& f) {
         grpc::ClientContext context;
         v1::ReleaseRequest r;
         r.set_session_id(f.session);
         r.add_handles(f.x);
         r.add_handles(f.other_handle);
         v1::ReleaseResponse response;
         return tc::FromGrpcStatus(f.stub->Release(&context, r, &response));
       },
       kNotFound, v1::TENSOR_NOT_FOUND},
  };
  return *rows;
}

class BadStateTest : public BadInputTest {};

TEST_P(BadStateTest, FailsWithItsReasonAndChangesNothing) { Check(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Table, BadStateTest, ::testing::ValuesIn(Rows()),
                         [](const ::testing::TestParamInfo<Row>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace tensord::service_test
