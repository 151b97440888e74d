// Malformed and hostile requests, sent as raw protos through the generated stub (most of them
// the client library would refuse to build). Each row names the exact gRPC code and reason;
// after each, the server still answers and the session's tensors are exactly as before.
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
namespace {

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

const std::vector<Row>& Rows() {
  static const auto* rows = new std::vector<Row>{
      // -- ops, arity, attributes
      {"UnknownOp",
       [](const Fixture& f) { return One(f, "frobnicate", {f.x}); },
       kInvalid,
       v1::UNKNOWN_OP,
       {{"op", "frobnicate"}, {"call_index", "0"}}},
      {"EmptyOpName", [](const Fixture& f) { return One(f, "", {f.x}); }, kInvalid, v1::UNKNOWN_OP},
      {"InternalHelperOp",
       [](const Fixture& f) {
         return One(f, "batch_matmul", {f.x, f.x});
       },
       kInvalid, v1::UNKNOWN_OP},
      {"TooFewInputs",
       [](const Fixture& f) { return One(f, "add", {f.x}); },
       kInvalid,
       v1::WRONG_ARITY,
       {{"op", "add"}, {"expected", "2"}, {"got", "1"}}},
      {"TooManyInputs",
       [](const Fixture& f) {
         return One(f, "neg", {f.x, f.x});
       },
       kInvalid,
       v1::WRONG_ARITY,
       {{"op", "neg"}}},
      {"AttrWrongType",
       [](const Fixture& f) {
         return One(f, "sum", {f.x}, [](v1::OpCall* c) { Attr(c, "dim").set_s("rows"); });
       },
       kInvalid,
       v1::BAD_ATTRIBUTE,
       {{"op", "sum"}, {"attribute", "dim"}}},
      {"AttrUnknown",
       [](const Fixture& f) {
         return One(f, "sum", {f.x}, [](v1::OpCall* c) { Attr(c, "bogus").set_i(1); });
       },
       kInvalid,
       v1::BAD_ATTRIBUTE,
       {{"attribute", "bogus"}}},
      {"AttrWithoutValue",
       [](const Fixture& f) { return One(f, "sum", {f.x}, [](v1::OpCall* c) { Attr(c, "dim"); }); },
       kInvalid,
       v1::BAD_ATTRIBUTE,
       {{"attribute", "dim"}}},
      {"AttrNotAChoice",
       [](const Fixture& f) {
         return One(f, "mse_loss", {f.y, f.y},
                    [](v1::OpCall* c) { Attr(c, "reduction").set_s("average"); });
       },
       kInvalid,
       v1::BAD_ATTRIBUTE,
       {{"attribute", "reduction"}}},
      {"AttrNaN",
       [](const Fixture& f) {
         return One(f, "leaky_relu", {f.x},
                    [](v1::OpCall* c) { Attr(c, "negative_slope").set_f(kNaN); });
       },
       kInvalid,
       v1::BAD_ATTRIBUTE,
       {{"attribute", "negative_slope"}}},
      {"AttrInfiniteProbability",
       [](const Fixture& f) {
         return One(f, "dropout", {f.x}, [](v1::OpCall* c) { Attr(c, "p").set_f(kInf); });
       },
       kInvalid,
       v1::BAD_ATTRIBUTE,
       {{"attribute", "p"}}},
      {"AttrDimOutOfRange",
       [](const Fixture& f) {
         return One(f, "sum", {f.x}, [](v1::OpCall* c) { Ints(c, "dim", {5}); });
       },
       kInvalid,
       v1::BAD_ATTRIBUTE,
       {{"attribute", "dim"}}},
      // -- shapes and dtypes
      {"BroadcastMismatch",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         v1::OpCall* c = Call(r, "add");
         Handle(c, f.x);
         Literal(c, v1::DTYPE_F32, {4}, F32Bytes({1, 2, 3, 4}));
         return Send(f, r);
       },
       kInvalid,
       v1::SHAPE_MISMATCH,
       {{"op", "add"}}},
      {"MatmulInnerDims",
       [](const Fixture& f) {
         return One(f, "matmul", {f.x, f.x});
       },
       kInvalid,
       v1::SHAPE_MISMATCH,
       {{"op", "matmul"}}},
      {"ReshapeWrongCount",
       [](const Fixture& f) {
         return One(f, "reshape", {f.x}, [](v1::OpCall* c) { Ints(c, "shape", {4, 2}); });
       },
       kInvalid,
       v1::SHAPE_MISMATCH,
       {{"op", "reshape"}}},
      {"MatmulOnIntegers",
       [](const Fixture& f) {
         return One(f, "matmul", {f.ints, f.ints});
       },
       kInvalid,
       v1::DTYPE_MISMATCH,
       {{"op", "matmul"}}},
      {"IndexOutOfRange",
       [](const Fixture& f) {
         return One(f, "index_select", {f.y, f.ints},
                    [](v1::OpCall* c) { Attr(c, "dim").set_i(0); });
       },
       Code::kOutOfRange,
       v1::INDEX_OUT_OF_RANGE,
       {{"op", "index_select"}}},
      // -- literals
      {"LiteralTooFewBytes",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Literal(Call(r, "neg"), v1::DTYPE_F32, {2, 2}, std::string(12, '\0'));
         return Send(f, r);
       },
       kInvalid,
       v1::BAD_TENSOR_DATA,
       {{"bytes", "12"}}},
      {"LiteralTooManyBytes",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Literal(Call(r, "neg"), v1::DTYPE_F64, {2}, std::string(17, '\0'));
         return Send(f, r);
       },
       kInvalid,
       v1::BAD_TENSOR_DATA,
       {{"bytes", "17"}}},
      {"LiteralNegativeDim",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Literal(Call(r, "neg"), v1::DTYPE_F32, {2, -1}, std::string(8, '\0'));
         return Send(f, r);
       },
       kInvalid,
       v1::SHAPE_MISMATCH,
       {{"call_index", "0"}}},
      {"LiteralDtypeUnspecified",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Literal(Call(r, "neg"), v1::DTYPE_UNSPECIFIED, {1}, std::string(4, '\0'));
         return Send(f, r);
       },
       kInvalid,
       v1::INVALID_REQUEST,
       {{"value", "0"}}},
      {"LiteralDtypeUnknown",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Literal(Call(r, "neg"), 99, {1}, std::string(4, '\0'));
         return Send(f, r);
       },
       kInvalid,
       v1::INVALID_REQUEST,
       {{"value", "99"}}},
      {"LiteralElementCountOverflow",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Literal(Call(r, "neg"), v1::DTYPE_F32, {1 << 20, 1 << 20, 1 << 20, 1 << 20}, "");
         return Send(f, r);
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "element_count"}}},
      {"LiteralOverMaxRank",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Literal(Call(r, "neg"), v1::DTYPE_F32, std::vector<int64_t>(9, 1), std::string(4, '\0'));
         return Send(f, r);
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "max_rank"}, {"value", "9"}, {"max", "8"}}},
      {"LiteralOverMaxDim",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Literal(Call(r, "neg"), v1::DTYPE_F32, {0, (1 << 20) + 1}, "");
         return Send(f, r);
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "max_dim"}, {"value", "1048577"}}},
      {"LiteralOverMaxTensorBytes",
       [](const Fixture& f) {
         // Refused from the header alone: 256 MiB announced, no data sent.
         v1::ExecuteRequest r = Batch(f);
         Literal(Call(r, "neg"), v1::DTYPE_F32, {1 << 20, 64}, "");
         return Send(f, r);
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "max_tensor_bytes"}, {"value", "268435456"}, {"max", "67108864"}}},
      // -- creation and derived shapes over the limits
      {"CreationOverMaxTensorBytes",
       [](const Fixture& f) {
         return One(f, "zeros", {}, [](v1::OpCall* c) { Ints(c, "shape", {1 << 20, 32}); });
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "max_tensor_bytes"}, {"op", "zeros"}}},
      {"CreationOverMaxRank",
       [](const Fixture& f) {
         return One(f, "zeros", {},
                    [](v1::OpCall* c) { Ints(c, "shape", std::vector<int64_t>(9, 1)); });
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "max_rank"}, {"attribute", "shape"}}},
      {"CreationNegativeDim",
       [](const Fixture& f) {
         return One(f, "zeros", {}, [](v1::OpCall* c) { Ints(c, "shape", {2, -3}); });
       },
       kInvalid,
       v1::SHAPE_MISMATCH,
       {{"op", "zeros"}}},
      {"CreationElementCountOverflow",
       [](const Fixture& f) {
         return One(f, "zeros", {}, [](v1::OpCall* c) {
           Ints(c, "shape", {1 << 20, 1 << 20, 1 << 20, 1 << 20});
         });
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "element_count"}}},
      {"ExpandOverMaxDim",
       [](const Fixture& f) {
         return One(f, "expand", {f.y}, [](v1::OpCall* c) { Ints(c, "size", {1 << 21, 3}); });
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "max_dim"}, {"op", "expand"}}},
      {"ReshapeOverMaxRank",
       [](const Fixture& f) {
         return One(f, "reshape", {f.y}, [](v1::OpCall* c) {
           std::vector<int64_t> shape(10, 1);
           shape[0] = 3;
           Ints(c, "shape", shape);
         });
       },
       kExhausted,
       v1::LIMIT_EXCEEDED,
       {{"limit", "max_rank"}, {"op", "reshape"}}},
      {"OverSessionQuota",
       [](const Fixture& f) -> absl::Status {
         tc::SessionOptions small;
         small.memory_quota_bytes = 1 << 20;
         absl::StatusOr<tc::Session> s = f.client->CreateSession(small);
         if (!s.ok()) return s.status();
         Fixture g = f;
         g.session = s->id();
         return One(g, "zeros", {}, [](v1::OpCall* c) { Ints(c, "shape", {1 << 20}); });
       },
       kExhausted,
       v1::QUOTA_EXCEEDED,
       {{"quota_bytes", "1048576"}}},
      {"BackwardOverSessionQuota",
       [](const Fixture& f) -> absl::Status {
         // The forward fits in 1 MiB (two 400 kB tensors); the gradients do not.
         tc::SessionOptions small;
         small.memory_quota_bytes = 1 << 20;
         absl::StatusOr<tc::Session> s = f.client->CreateSession(small);
         if (!s.ok()) return s.status();
         absl::StatusOr<tc::AutodiffContext> ctx = s->OpenAutodiff();
         if (!ctx.ok()) return ctx.status();
         absl::StatusOr<tc::Tensor> w =
             s->Put(tc::HostTensor(std::vector<float>(100000, 1.0f)), {true, ctx->id()});
         if (!w.ok()) return w.status();
         absl::StatusOr<std::vector<tc::Tensor>> wv = s->Op("mul", {*w, 2.0});
         if (!wv.ok()) return wv.status();
         absl::StatusOr<std::vector<tc::Tensor>> sum = s->Op("sum", {(*wv)[0]});
         if (!sum.ok()) return sum.status();
         return ctx->Backward({(*sum)[0]}).status();
       },
       kExhausted, v1::QUOTA_EXCEEDED, {{"quota_bytes", "1048576"}}},
      // -- operands
      {"OperandFromLaterCall",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Output(Call(r, "neg"), 1, 0);
         Handle(Call(r, "neg"), f.x);
         return Send(f, r);
       },
       kInvalid,
       v1::BAD_OPERAND,
       {{"call_index", "0"}, {"operand_call", "1"}}},
      {"OperandFromItself",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Handle(Call(r, "neg"), f.x);
         Output(Call(r, "neg"), 1, 0);
         return Send(f, r);
       },
       kInvalid,
       v1::BAD_OPERAND,
       {{"call_index", "1"}, {"operand_call", "1"}}},
      {"OperandMissingOutput",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Handle(Call(r, "neg"), f.x);
         Output(Call(r, "neg"), 0, 5);
         return Send(f, r);
       },
       kInvalid,
       v1::BAD_OPERAND,
       {{"call_index", "1"}, {"operand_output", "5"}}},
      {"OperandWithoutSource",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Call(r, "neg")->add_inputs();
         return Send(f, r);
       },
       kInvalid,
       v1::BAD_OPERAND,
       {{"call_index", "0"}}},
      {"ScalarWithoutValue",
       [](const Fixture& f) {
         return One(f, "add", {f.x}, [](v1::OpCall* c) { c->add_inputs()->mutable_scalar(); });
       },
       kInvalid,
       v1::BAD_OPERAND,
       {{"call_index", "0"}}},
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

  Fixture f_;
  std::unique_ptr<v1::Tensord::Stub> stub_;
  tc::Tensor x_, y_, ints_, w_, wv_;
  std::optional<tc::AutodiffContext> ctx_;
  std::unique_ptr<tc::Session> other_;
  std::vector<tc::Tensor> other_tensors_;
  std::vector<tc::AutodiffContext> other_contexts_;
};

TEST_P(BadInputTest, FailsWithItsReasonAndChangesNothing) {
  const Row& row = GetParam();
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

INSTANTIATE_TEST_SUITE_P(Table, BadInputTest, ::testing::ValuesIn(Rows()),
                         [](const ::testing::TestParamInfo<Row>& info) {
                           return std::string(info.param.name);
                         });

TEST(BadInputTableTest, HasAtLeastFortyRows) { EXPECT_GE(Rows().size(), 40u); }

}  // namespace
}  // namespace tensord::service_test
