// Writes the seed corpus of request_fuzzer: valid RPC sequences in the fuzzer's input layout
// (see request_fuzzer.cc), against the fixture session every input starts from (handles 1-4,
// context 1). Seeds give the fuzzer real op names, attributes, stream framing and call orders
// (context lifecycles, releases, reads, cancellations) to mutate.
//   make_corpus <dir>       (scripts/fuzz.sh --regen-corpus runs it into tests/fuzz/corpus)
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tensord/v1/service.pb.h"

namespace {

using tensord::v1::BackwardRequest;
using tensord::v1::CloseAutodiffContextRequest;
using tensord::v1::CompileProgramRequest;
using tensord::v1::ExecuteRequest;
using tensord::v1::GetTensorRequest;
using tensord::v1::JoinGroupRequest;
using tensord::v1::OpCall;
using tensord::v1::OpenAutodiffContextRequest;
using tensord::v1::PutTensorRequest;
using tensord::v1::RegisterSharedMemoryRequest;
using tensord::v1::ReleaseProgramRequest;
using tensord::v1::ReleaseRequest;
using tensord::v1::RunProgramRequest;
using tensord::v1::UnregisterSharedMemoryRequest;

// Step tags: the RPC in bits 0-3, then flags.
constexpr uint8_t kExecute = 0, kPut = 1, kBackward = 2, kExecuteBackward = 3, kOpen = 4,
                  kClose = 5, kRelease = 6, kGet = 7, kKeepAlive = 8, kInfo = 9, kCompileRun = 10,
                  kRunProgram = 11, kReleaseProgram = 12, kRegisterShm = 13, kUnregisterShm = 14,
                  kGroup = 15;
constexpr uint8_t kKeepSessionId = 0x10;
// Cancelled after n polls of the cancellation check.
constexpr uint8_t Cancel(int n) { return static_cast<uint8_t>(0x20 | (n << 6)); }

std::string Bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

OpCall* Call(ExecuteRequest& req, const std::string& op) {
  OpCall* c = req.add_calls();
  c->set_op(op);
  return c;
}
OpCall* Call(CompileProgramRequest& req, const std::string& op, bool update = false) {
  OpCall* c = update ? req.add_updates() : req.add_calls();
  c->set_op(op);
  return c;
}
void Handle(OpCall* c, uint64_t h) { c->add_inputs()->set_handle(h); }
void Param(OpCall* c, uint32_t p) { c->add_inputs()->set_parameter(p); }
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
  a.mutable_ints();  // set even when empty: a 0-d shape
  for (int64_t x : v) a.mutable_ints()->add_values(x);
}
void Int(OpCall* c, const std::string& name, int64_t v) { (*c->mutable_attrs())[name].set_i(v); }

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

// One input: steps [tag][u16 length LE][payload].
class Seed {
 public:
  Seed& Step(uint8_t tag, const google::protobuf::MessageLite& m) {
    return Raw(tag, m.SerializeAsString());
  }
  Seed& Put(const std::vector<PutTensorRequest>& msgs, uint8_t flags = 0) {
    return Raw(kPut | flags, Frames(msgs));
  }
  Seed& Raw(uint8_t tag, const std::string& payload) {
    bytes_.push_back(static_cast<char>(tag));
    bytes_.push_back(static_cast<char>(payload.size() & 0xff));
    bytes_.push_back(static_cast<char>(payload.size() >> 8));
    bytes_ += payload;
    return *this;
  }
  bool Write(const std::string& dir, const std::string& name) const {
    std::ofstream f(dir + "/" + name, std::ios::binary);
    f << bytes_;
    return static_cast<bool>(f);
  }

 private:
  std::string bytes_;
};

std::vector<PutTensorRequest> F32Put(std::vector<int64_t> shape, std::vector<float> v,
                                     bool requires_grad = false, uint64_t context = 0) {
  std::vector<PutTensorRequest> msgs(2);
  auto* h = msgs[0].mutable_header();
  h->set_dtype(tensord::v1::DTYPE_F32);
  for (int64_t d : shape) h->add_shape(d);
  h->set_requires_grad(requires_grad);
  h->set_context_id(context);
  msgs[1].set_chunk(Bytes(v.data(), v.size() * sizeof(float)));
  return msgs;
}

BackwardRequest Backward(uint64_t context, std::vector<uint64_t> roots,
                         std::vector<uint64_t> seeds = {}, bool retain_graph = false) {
  BackwardRequest r;
  r.set_context_id(context);
  for (uint64_t h : roots) r.add_roots(h);
  for (uint64_t h : seeds) r.add_seeds(h);
  r.set_retain_graph(retain_graph);
  return r;
}
ReleaseRequest Release(std::vector<uint64_t> handles) {
  ReleaseRequest r;
  for (uint64_t h : handles) r.add_handles(h);
  return r;
}
GetTensorRequest Get(uint64_t handle, uint32_t chunk_bytes = 0) {
  GetTensorRequest r;
  r.set_handle(handle);
  r.set_chunk_bytes(chunk_bytes);
  return r;
}
CloseAutodiffContextRequest Close(uint64_t context) {
  CloseAutodiffContextRequest r;
  r.set_context_id(context);
  return r;
}
// A step on the fixture's leaf 3 (f32 [2, 3], context 1) as a program: loss =
// sum(param0 * leaf), its gradient fetched, then SGD on the leaf with it.
CompileProgramRequest SgdProgram() {
  CompileProgramRequest r;
  r.set_context_id(1);
  auto* x = r.add_parameters();
  x->set_name("x");
  x->mutable_example()->set_handle(1);
  OpCall* m = Call(r, "mul");
  Param(m, 0);
  Handle(m, 3);
  OpCall* loss = Call(r, "sum");
  Prev(loss, 0);
  loss->set_fetch(true);
  auto* root = r.mutable_backward()->add_roots();
  root->set_call(1);
  r.mutable_backward()->add_leaves(3);
  r.mutable_backward()->set_fetch_gradients(true);
  OpCall* sgd = Call(r, "sgd", /*update=*/true);
  Handle(sgd, 3);
  sgd->add_inputs()->set_gradient(3);
  (*sgd->mutable_attrs())["lr"].set_f(0.1);
  return r;
}
RunProgramRequest RunProgram(uint64_t program, std::vector<tensord::v1::Operand> inputs) {
  RunProgramRequest r;
  r.set_program_id(program);
  for (auto& in : inputs) *r.add_inputs() = in;
  return r;
}
tensord::v1::Operand HandleOperand(uint64_t h) {
  tensord::v1::Operand o;
  o.set_handle(h);
  return o;
}
tensord::v1::Operand F32Operand(std::vector<int64_t> shape, std::vector<float> v) {
  OpCall c;
  F32(&c, shape, v);
  return c.inputs(0);
}
ReleaseProgramRequest ReleaseProgram(uint64_t program) {
  ReleaseProgramRequest r;
  r.set_program_id(program);
  return r;
}

// A recorded mul of `leaf` with handle 1, then its sum (a one-element root).
ExecuteRequest MulSum(uint64_t context, uint64_t leaf) {
  ExecuteRequest r;
  r.set_context_id(context);
  OpCall* m = Call(r, "mul");
  Handle(m, leaf);
  Handle(m, 1);
  Prev(Call(r, "sum"), 0);
  return r;
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
    ok &= Seed().Step(kExecute, r).Write(dir, "execute_add_literal");
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
    ok &= Seed().Step(kExecute, r).Write(dir, "execute_matmul_sum");
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
    ok &= Seed().Step(kExecute, r).Write(dir, "execute_shape_index_where");
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
    ok &= Seed().Step(kExecuteBackward, r).Write(dir, "execute_backward_softmax_mse");
  }
  {  // an optimizer-style in-place update in a no_grad batch
    ExecuteRequest r;
    r.set_no_grad(true);
    OpCall* a = Call(r, "assign");
    Handle(a, 3);
    F32(a, {2, 3}, {0, 0, 0, 1, 1, 1});
    ok &= Seed().Step(kExecute, r).Write(dir, "execute_assign_no_grad");
  }
  {  // fused optimizer steps on the autodiff leaf, state made in the same no_grad batch
    ExecuteRequest r;
    r.set_no_grad(true);
    for (int k = 0; k < 3; ++k) Handle(Call(r, "zeros_like"), 3);  // calls 0-2
    OpCall* step = Call(r, "zeros");                               // call 3
    Ints(step, "shape", {});
    OpCall* adam = Call(r, "adam");
    Handle(adam, 3);
    Handle(adam, 1);
    Prev(adam, 0);
    Prev(adam, 1);
    Prev(adam, 3);
    Prev(adam, 2);
    (*adam->mutable_attrs())["lr"].set_f(0.1);
    (*adam->mutable_attrs())["amsgrad"].set_b(true);
    OpCall* sgd = Call(r, "sgd");
    Handle(sgd, 3);
    Handle(sgd, 1);
    Prev(sgd, 0);
    Prev(sgd, 3);
    (*sgd->mutable_attrs())["lr"].set_f(0.5);
    (*sgd->mutable_attrs())["momentum"].set_f(0.9);
    sgd->set_fetch(true);
    ok &= Seed().Step(kExecute, r).Write(dir, "execute_optimizer_steps");
  }
  {  // an adamw step, then a failing call: the parameter and its state are put back
    ExecuteRequest r;
    r.set_no_grad(true);
    for (int k = 0; k < 2; ++k) Handle(Call(r, "zeros_like"), 1);
    Ints(Call(r, "zeros"), "shape", {});
    OpCall* adamw = Call(r, "adamw");
    Handle(adamw, 1);
    Handle(adamw, 3);
    Prev(adamw, 0);
    Prev(adamw, 1);
    Prev(adamw, 2);
    OpCall* bad = Call(r, "matmul");
    Handle(bad, 1);
    Handle(bad, 1);
    ok &= Seed().Step(kExecute, r).Write(dir, "execute_optimizer_rollback");
  }
  {  // a batch whose second call fails: the rollback path
    ExecuteRequest r;
    OpCall* a = Call(r, "relu");
    Handle(a, 1);
    OpCall* b = Call(r, "matmul");
    Prev(b, 0);
    Handle(b, 1);
    ok &= Seed().Step(kExecute, r).Write(dir, "execute_rollback");
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
    ok &= Seed().Step(kExecute, r).Write(dir, "execute_creation_split_cast");
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
    ok &= Seed().Step(kExecute, r).Write(dir, "execute_conv_pool");
  }
  {  // a session id that does not exist
    ExecuteRequest r;
    r.set_session_id("00000000000000000000000000000000");
    Handle(Call(r, "neg"), 1);
    ok &= Seed().Step(kExecute | kKeepSessionId, r).Write(dir, "execute_unknown_session");
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
    ok &= Seed().Put(msgs).Write(dir, "put_f32_two_chunks");
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
    ok &= Seed().Put(msgs).Write(dir, "put_f64_requires_grad");
  }
  {  // put of a bf16 tensor and of a 0-d i32
    std::vector<PutTensorRequest> msgs(2);
    auto* h = msgs[0].mutable_header();
    h->set_dtype(tensord::v1::DTYPE_BF16);
    h->add_shape(2);
    const uint16_t v[2] = {0x3f80, 0xc000};
    msgs[1].set_chunk(Bytes(v, sizeof(v)));
    ok &= Seed().Put(msgs).Write(dir, "put_bf16");
    std::vector<PutTensorRequest> narrow(2);
    narrow[0].mutable_header()->set_dtype(tensord::v1::DTYPE_U8);
    narrow[0].mutable_header()->add_shape(3);
    const uint8_t bytes[3] = {0, 128, 255};
    narrow[1].set_chunk(Bytes(bytes, sizeof(bytes)));
    ok &= Seed().Put(narrow).Write(dir, "put_u8");
    std::vector<PutTensorRequest> scalar(2);
    scalar[0].mutable_header()->set_dtype(tensord::v1::DTYPE_I32);
    const int32_t x = 7;
    scalar[1].set_chunk(Bytes(&x, sizeof(x)));
    ok &= Seed().Put(scalar).Write(dir, "put_i32_scalar");
  }
  {  // a context's life: open (balanced), a leaf put into it, a recorded forward, backward
     // keeping the graph, backward consuming it, one more (nothing left), close, then uses
     // of the closed context's tensor and of the context itself
    OpenAutodiffContextRequest open;
    open.set_checkpointing(tensord::v1::CHECKPOINTING_BALANCED);
    ExecuteRequest use_closed;
    Handle(Call(use_closed, "neg"), 5);
    ok &= Seed()
              .Step(kOpen, open)
              .Put(F32Put({2, 3}, {1, 2, 3, 4, 5, 6}, true, 2))
              .Step(kExecute, MulSum(2, 5))
              .Step(kBackward, Backward(2, {7}, {}, true))
              .Step(kBackward, Backward(2, {7}))
              .Step(kBackward, Backward(2, {7}))
              .Step(kClose, Close(2))
              .Step(kExecute, use_closed)
              .Step(kBackward, Backward(2, {7}))
              .Step(kClose, Close(2))
              .Write(dir, "sequence_context_lifecycle");
  }
  {  // backward of a non-scalar root with an explicit seed, then a wrong-shaped seed
    ExecuteRequest r;
    r.set_context_id(1);
    OpCall* m = Call(r, "mul");
    Handle(m, 3);
    Handle(m, 1);
    ok &= Seed()
              .Step(kExecute, r)
              .Step(kBackward, Backward(1, {5}, {1}, true))
              .Step(kBackward, Backward(1, {5}, {2}))
              .Step(kBackward, Backward(1, {5, 5}, {1}))
              .Write(dir, "sequence_backward_seeds");
  }
  {  // reads and releases: a chunked get, an atomic release that fails on one stale handle,
     // a release, a get and a release of the freed handle, session info, keep-alive
    ok &= Seed()
              .Step(kGet, Get(1, 5))
              .Step(kRelease, Release({2, 99}))
              .Step(kRelease, Release({2, 4}))
              .Step(kGet, Get(2))
              .Step(kRelease, Release({2}))
              .Step(kInfo, tensord::v1::GetSessionInfoRequest())
              .Step(kKeepAlive, tensord::v1::KeepAliveRequest())
              .Write(dir, "sequence_release_get");
  }
  {  // a client that gives up: a batch cancelled at its second call, a cancelled backward and
     // a cancelled put
    ExecuteRequest r;
    r.set_context_id(1);
    Handle(Call(r, "relu"), 3);
    Prev(Call(r, "exp"), 0);
    Prev(Call(r, "sum"), 1);
    ok &= Seed()
              .Step(kExecute | Cancel(1), r)
              .Step(kExecute, MulSum(1, 3))
              .Step(kBackward | Cancel(0), Backward(1, {6}))
              .Put(F32Put({2}, {1, 2}), Cancel(1))
              .Step(kBackward, Backward(1, {6}))
              .Write(dir, "sequence_cancelled");
  }
  {  // the fixture's context closed, then its leaf used in a recorded op and a backward;
     // gradients released before the context goes
    ExecuteRequest r;
    r.set_context_id(1);
    OpCall* m = Call(r, "mul");
    Handle(m, 3);
    m->add_inputs()->mutable_scalar()->set_f(2.0);
    ok &= Seed()
              .Step(kExecuteBackward, MulSum(1, 3))
              .Step(kRelease, Release({7}))
              .Step(kClose, Close(1))
              .Step(kExecute, r)
              .Step(kBackward, Backward(1, {3}))
              .Step(kOpen, OpenAutodiffContextRequest())
              .Step(kClose, Close(99))
              .Write(dir, "sequence_closed_context");
  }
  {  // calls naming a session that does not exist
    const std::string unknown = "00000000000000000000000000000000";
    BackwardRequest b = Backward(1, {3});
    b.set_session_id(unknown);
    ReleaseRequest rel = Release({1});
    rel.set_session_id(unknown);
    GetTensorRequest get = Get(1);
    get.set_session_id(unknown);
    CloseAutodiffContextRequest close = Close(1);
    close.set_session_id(unknown);
    ok &= Seed()
              .Step(kBackward | kKeepSessionId, b)
              .Step(kRelease | kKeepSessionId, rel)
              .Step(kGet | kKeepSessionId, get)
              .Step(kClose | kKeepSessionId, close)
              .Write(dir, "sequence_unknown_session");
  }
  {  // a training step as a program: compiled and run on its example, run on a literal, on
     // one of the wrong shape and with too many inputs, released, then run once more
    ok &= Seed()
              .Step(kCompileRun, SgdProgram())
              .Step(kRunProgram, RunProgram(1, {F32Operand({2, 3}, {1, 1, 1, 2, 2, 2})}))
              .Step(kRunProgram, RunProgram(1, {F32Operand({3}, {1, 2, 3})}))
              .Step(kRunProgram, RunProgram(1, {HandleOperand(1), HandleOperand(1)}))
              .Step(kReleaseProgram, ReleaseProgram(1))
              .Step(kRunProgram, RunProgram(1, {HandleOperand(1)}))
              .Step(kReleaseProgram, ReleaseProgram(1))
              .Write(dir, "program_sgd_step");
  }
  {  // an inference program (no_grad) keeping one output and fetching another, with a scalar
     // parameter; run with a scalar of another kind; then a program whose context closes
    CompileProgramRequest r;
    r.set_no_grad(true);
    r.add_parameters()->mutable_example()->set_handle(1);
    r.add_parameters()->mutable_example()->mutable_scalar()->set_f(2.0);
    OpCall* relu = Call(r, "relu");
    Param(relu, 0);
    relu->set_keep(true);
    OpCall* mul = Call(r, "mul");
    Prev(mul, 0);
    Param(mul, 1);
    mul->set_fetch(true);
    tensord::v1::Operand int_scalar;
    int_scalar.mutable_scalar()->set_i(3);
    tensord::v1::Operand float_scalar;
    float_scalar.mutable_scalar()->set_f(0.5);
    ok &= Seed()
              .Step(kCompileRun, r)
              .Step(kRunProgram, RunProgram(1, {HandleOperand(1), float_scalar}))
              .Step(kRunProgram, RunProgram(1, {HandleOperand(1), int_scalar}))
              .Step(kCompileRun, SgdProgram())
              .Step(kClose, Close(1))
              .Step(kRunProgram, RunProgram(2, {HandleOperand(1)}))
              .Write(dir, "program_inference_and_closed_context");
  }
  {  // programs the server refuses: an unmarked op on the leaf, a backward without a
     // context, an update making a requires-grad leaf, and a cancelled compile
    CompileProgramRequest unmarked;
    unmarked.set_context_id(1);
    OpCall* assign = Call(unmarked, "assign");
    Handle(assign, 3);
    Handle(assign, 1);
    CompileProgramRequest no_context = SgdProgram();
    no_context.set_context_id(0);
    CompileProgramRequest grad_update = SgdProgram();
    grad_update.mutable_updates(0)->set_requires_grad(true);
    ok &= Seed()
              .Step(kCompileRun, unmarked)
              .Step(kCompileRun, no_context)
              .Step(kCompileRun, grad_update)
              .Step(kCompileRun | Cancel(1), SgdProgram())
              .Write(dir, "program_refused");
  }
  {  // shared memory: a region of the fixture's object "/a", a put from it, gets to it (one
     // past its end), a second region of the same name, a missing object, an unregister,
     // and uses of the unregistered region
    auto region = [](const std::string& name, const std::string& key, uint64_t offset,
                     uint64_t bytes) {
      RegisterSharedMemoryRequest r;
      r.mutable_region()->set_name(name);
      r.mutable_region()->set_key(key);
      r.mutable_region()->set_offset(offset);
      r.mutable_region()->set_byte_size(bytes);
      return r;
    };
    std::vector<PutTensorRequest> put(1);
    put[0].mutable_header()->set_dtype(tensord::v1::DTYPE_F32);
    put[0].mutable_header()->add_shape(2);
    put[0].mutable_header()->add_shape(3);
    put[0].mutable_header()->mutable_shared_memory()->set_region("r");
    auto get = [](uint64_t handle, uint64_t offset) {
      GetTensorRequest g;
      g.set_handle(handle);
      g.mutable_shared_memory()->set_region("r");
      g.mutable_shared_memory()->set_offset(offset);
      return g;
    };
    UnregisterSharedMemoryRequest unregister;
    unregister.set_name("r");
    ok &= Seed()
              .Step(kRegisterShm, region("r", "/a", 16, 1024))
              .Step(kGet, get(1, 0))
              .Put(put)
              .Step(kGet, get(5, 100))
              .Step(kGet, get(1, 1000))
              .Step(kRegisterShm, region("r", "/a", 0, 64))
              .Step(kRegisterShm, region("s", "/missing", 0, 64))
              .Step(kRegisterShm, region("t", "/a", 4000, 200))
              .Step(kUnregisterShm, unregister)
              .Put(put)
              .Step(kUnregisterShm, unregister)
              .Write(dir, "shared_memory_put_get");
  }
  {  // process groups: a group of one and its collectives, a group whose second rank never
     // comes, a second join, a leave, and a collective after it
    auto join = [](const std::string& group, int rank, int world) {
      JoinGroupRequest r;
      r.set_group(group);
      r.set_rank(rank);
      r.set_world_size(world);
      return r;
    };
    ExecuteRequest collectives;
    F32(Call(collectives, "all_reduce"), {2}, {1, 2});
    Prev(Call(collectives, "all_gather"), 0);
    Prev(Call(collectives, "reduce_scatter"), 1);
    Prev(Call(collectives, "broadcast"), 0);
    Call(collectives, "barrier");
    ok &= Seed()
              .Step(kGroup, join("solo", 0, 1))
              .Step(kExecute, collectives)
              .Step(kGroup, join("again", 0, 1))
              .Step(kGroup, JoinGroupRequest())
              .Step(kExecute, collectives)
              .Step(kGroup, join("pair", 0, 2))
              .Step(kGroup, join("bad", 3, 2))
              .Write(dir, "process_groups");
    // A backward that reduces its gradients across a group of one: a good bucket, then a
    // bucket naming the loss (not a leaf), an empty one, a leaf named twice, a bad op.
    auto reduced = [](std::vector<std::vector<uint64_t>> buckets, const std::string& op) {
      BackwardRequest r = Backward(2, {7}, {}, true);
      r.mutable_reduce()->set_op(op);
      for (const auto& bucket : buckets) {
        auto* b = r.mutable_reduce()->add_buckets();
        for (uint64_t h : bucket) b->add_leaves(h);
      }
      return r;
    };
    ok &= Seed()
              .Step(kGroup, join("reducing", 0, 1))
              .Step(kOpen, OpenAutodiffContextRequest())
              .Put(F32Put({2, 3}, {1, 2, 3, 4, 5, 6}, true, 2))
              .Step(kExecute, MulSum(2, 5))
              .Step(kBackward, reduced({{5}}, "mean"))
              .Step(kBackward, reduced({{7}}, "sum"))
              .Step(kBackward, reduced({{}, {5}}, ""))
              .Step(kBackward, reduced({{5}, {5}}, "mean"))
              .Step(kBackward, reduced({{5}}, "max"))
              .Write(dir, "backward_reducing_gradients");
  }
  if (!ok) {
    std::fprintf(stderr, "make_corpus: could not write into %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
