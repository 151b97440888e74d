// Bad input, part 1: the calls of a batch (ops, arity, attributes, shapes and dtypes,
// literals, sizes over the limits, operands). See bad_input_util.h.
#include "tests/service/bad_input_util.h"

namespace tensord::service_test {
namespace {

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
      {"EmptyLiteralWhoseOtherDimensionsOverflow",
       [](const Fixture& f) {
         v1::ExecuteRequest r = Batch(f);
         Literal(Call(r, "neg"), v1::DTYPE_I64, {0, 1 << 20, 1 << 20, 1 << 20, 1 << 20}, "");
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
       kExhausted,
       v1::QUOTA_EXCEEDED,
       {{"quota_bytes", "1048576"}}},
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
  };
  return *rows;
}

class BadCallTest : public BadInputTest {};

TEST_P(BadCallTest, FailsWithItsReasonAndChangesNothing) { Check(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Table, BadCallTest, ::testing::ValuesIn(Rows()),
                         [](const ::testing::TestParamInfo<Row>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace tensord::service_test
