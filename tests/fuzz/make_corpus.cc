// Writes the seed corpus of request_fuzzer: valid requests in the fuzzer's input layout (see
// request_fuzzer.cc), against the fixture session every input starts from (handles 1-4,
// context 1). Seeds give the fuzzer real op names, attributes and stream framing to mutate.
//   make_corpus <dir>       (scripts/fuzz.sh --regen-corpus runs it into tests/fuzz/corpus)
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tensord/v1/service.pb.h"

namespace {

using tensord::v1::ExecuteRequest;
using tensord::v1::OpCall;
using tensord::v1::PutTensorRequest;

constexpr uint8_t kExecute = 0, kPut = 2, kExecuteBackward = 3;

std::string Bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

OpCall* Call(ExecuteRequest& req, const std::string& op) {
  OpCall* c = req.add_calls();
  c->set_op(op);
  return c;
}
void Handle(OpCall* c, uint64_t h) { c->add_inputs()->set_handle(h); }
void Prev(OpCall* c, uint32_t call, uint32_t output = 0) {
  auto* o = c->add_inputs()->mutable_call_output();
  o->set_call(call);
  o->set_output(output);
}
void F32(OpCall* c, std::vector<int64_t> shape, std::vector<float> v) {
  auto* lit = c->add_inputs()->mutable_literal();
  lit->set_dtype(tensord::v1::DTYPE_F32);
  for (int64_t d : shape) lit->add_shape(d);
  lit->set_data(Bytes(v.data(), v.size() * sizeof(float)));
}
void Ints(OpCall* c, const std::string& name, std::vector<int64_t> v) {
  auto& a = (*c->mutable_attrs())[name];
  for (int64_t x : v) a.mutable_ints()->add_values(x);
}
void Int(OpCall* c, const std::string& name, int64_t v) { (*c->mutable_attrs())[name].set_i(v); }

bool Write(const std::string& dir, const std::string& name, uint8_t selector,
           const std::string& body) {
  std::ofstream f(dir + "/" + name, std::ios::binary);
  f.put(static_cast<char>(selector));
  f << body;
  return static_cast<bool>(f);
}
bool WriteExecute(const std::string& dir, const std::string& name, uint8_t selector,
                  const ExecuteRequest& req) {
  return Write(dir, name, selector, req.SerializeAsString());
}
std::string Frames(const std::vector<PutTensorRequest>& msgs) {
  std::string out;
  for (const auto& m : msgs) {
    const std::string s = m.SerializeAsString();
    out.push_back(static_cast<char>(s.size() & 0xff));
    out.push_back(static_cast<char>(s.size() >> 8));
    out += s;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus <dir>\n");
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  {  // broadcasting add with a literal, fetched inline
    ExecuteRequest r;
    OpCall* c = Call(r, "add");
    Handle(c, 1);
    F32(c, {3}, {1, 2, 3});
    c->set_fetch(true);
    ok &= WriteExecute(dir, "execute_add_literal", kExecute, r);
  }
  {  // matmul, then a reduction with attributes over its output
    ExecuteRequest r;
    OpCall* m = Call(r, "matmul");
    Handle(m, 1);
    F32(m, {3, 2}, {1, 0, 0, 1, 1, 1});
    OpCall* s = Call(r, "sum");
    Prev(s, 0);
    Ints(s, "dim", {1});
    (*s->mutable_attrs())["keepdim"].set_b(true);
    s->set_fetch(true);
    ok &= WriteExecute(dir, "execute_matmul_sum", kExecute, r);
  }
  {  // shape ops and indexing with the i64 handle
    ExecuteRequest r;
    OpCall* t = Call(r, "transpose");
    Handle(t, 1);
    Int(t, "dim0", 0);
    Int(t, "dim1", 1);
    OpCall* idx = Call(r, "clamp");
    Handle(idx, 2);
    Int(idx, "min", 0);
    Int(idx, "max", 2);
    OpCall* i = Call(r, "index_select");
    Prev(i, 0);
    Int(i, "dim", 0);
    Prev(i, 1);
    OpCall* w = Call(r, "where");
    Handle(w, 4);
    Handle(w, 1);
    w->add_inputs()->mutable_scalar()->set_f(0.0);
    w->set_fetch(true);
    ok &= WriteExecute(dir, "execute_shape_index_where", kExecute, r);
  }
  {  // a recorded forward on the autodiff leaf, then Backward of its loss
    ExecuteRequest r;
    r.set_context_id(1);
    OpCall* m = Call(r, "mul");
    Handle(m, 3);
    m->add_inputs()->mutable_scalar()->set_f(2.0);
    OpCall* sm = Call(r, "softmax");
    Prev(sm, 0);
    Int(sm, "dim", -1);
    OpCall* l = Call(r, "mse_loss");
    Prev(l, 1);
    Handle(l, 1);
    ok &= WriteExecute(dir, "execute_backward_softmax_mse", kExecuteBackward, r);
  }
  {  // an optimizer-style in-place update in a no_grad batch
    ExecuteRequest r;
    r.set_no_grad(true);
    OpCall* a = Call(r, "assign");
    Handle(a, 3);
    F32(a, {2, 3}, {0, 0, 0, 1, 1, 1});
    ok &= WriteExecute(dir, "execute_assign_no_grad", kExecute, r);
  }
  {  // a batch whose second call fails: the rollback path
    ExecuteRequest r;
    OpCall* a = Call(r, "relu");
    Handle(a, 1);
    OpCall* b = Call(r, "matmul");
    Prev(b, 0);
    Handle(b, 1);
    ok &= WriteExecute(dir, "execute_rollback", kExecute, r);
  }
  {  // creation ops, multi-output split and a cast
    ExecuteRequest r;
    OpCall* z = Call(r, "ones");
    Ints(z, "shape", {4, 2});
    OpCall* s = Call(r, "split");
    Prev(s, 0);
    Int(s, "split_size", 1);
    OpCall* c = Call(r, "to_dtype");
    Prev(c, 1, 3);
    (*c->mutable_attrs())["dtype"].set_s("i32");
    c->set_fetch(true);
    ok &= WriteExecute(dir, "execute_creation_split_cast", kExecute, r);
  }
  {  // conv2d + max_pool2d on a literal image
    ExecuteRequest r;
    OpCall* c = Call(r, "conv2d");
    F32(c, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    F32(c, {1, 1, 2, 2}, {1, 0, 0, -1});
    OpCall* p = Call(r, "max_pool2d");
    Prev(p, 0);
    Ints(p, "kernel_size", {2, 2});
    p->set_fetch(true);
    ok &= WriteExecute(dir, "execute_conv_pool", kExecute, r);
  }
  {  // a session id that does not exist
    ExecuteRequest r;
    r.set_session_id("00000000000000000000000000000000");
    Handle(Call(r, "neg"), 1);
    ok &= WriteExecute(dir, "execute_unknown_session", kExecute | 0x4, r);
  }
  {  // put: header, then the data in two chunks
    std::vector<PutTensorRequest> msgs(3);
    auto* h = msgs[0].mutable_header();
    h->set_dtype(tensord::v1::DTYPE_F32);
    h->add_shape(2);
    h->add_shape(2);
    const float v[4] = {1, 2, 3, 4};
    msgs[1].set_chunk(Bytes(v, 8));
    msgs[2].set_chunk(Bytes(v + 2, 8));
    ok &= Write(dir, "put_f32_two_chunks", kPut, Frames(msgs));
  }
  {  // put a requires-grad leaf into context 1
    std::vector<PutTensorRequest> msgs(2);
    auto* h = msgs[0].mutable_header();
    h->set_dtype(tensord::v1::DTYPE_F64);
    h->add_shape(3);
    h->set_requires_grad(true);
    h->set_context_id(1);
    const double v[3] = {1, -2, 0.5};
    msgs[1].set_chunk(Bytes(v, sizeof(v)));
    ok &= Write(dir, "put_f64_requires_grad", kPut, Frames(msgs));
  }
  {  // put of a bf16 tensor and of a 0-d i32
    std::vector<PutTensorRequest> msgs(2);
    auto* h = msgs[0].mutable_header();
    h->set_dtype(tensord::v1::DTYPE_BF16);
    h->add_shape(2);
    const uint16_t v[2] = {0x3f80, 0xc000};
    msgs[1].set_chunk(Bytes(v, sizeof(v)));
    ok &= Write(dir, "put_bf16", kPut, Frames(msgs));
    std::vector<PutTensorRequest> scalar(2);
    scalar[0].mutable_header()->set_dtype(tensord::v1::DTYPE_I32);
    const int32_t x = 7;
    scalar[1].set_chunk(Bytes(&x, sizeof(x)));
    ok &= Write(dir, "put_i32_scalar", kPut, Frames(scalar));
  }
  if (!ok) {
    std::fprintf(stderr, "make_corpus: could not write into %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
