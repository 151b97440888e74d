// libFuzzer target: arbitrary bytes become a sequence of RPCs of one session, each going
// through the path a gRPC call takes (ServiceCore: decode → validate → dispatch → commit, then
// the one absl → grpc::Status conversion), in-process, with no network in between.
//
// Input layout (tests/fuzz/make_corpus.cc writes valid seeds in it): up to kMaxSteps steps,
//   [u8 tag][u16 little-endian length][payload]   (a short last payload takes what is left)
//   tag bits 0-3  the RPC (modulo kRpcCount):
//     0 Execute (ExecuteRequest)      1 PutTensor stream        2 Backward (BackwardRequest)
//     3 Execute, then Backward of its one-element autodiff outputs
//     4 OpenAutodiffContext           5 CloseAutodiffContext    6 Release (ReleaseRequest)
//     7 GetTensor (GetTensorRequest)  8 KeepAlive               9 GetSessionInfo
//    10 CompileProgram, then RunProgram of it with its examples as the inputs
//    11 RunProgram                    12 ReleaseProgram
//    13 RegisterSharedMemory (a key "/x" names the object "<this process's prefix>x"; the
//       fixture made "<prefix>a" of 4096 bytes)         14 UnregisterSharedMemory
//    15 JoinGroup (JoinGroupRequest; its rendezvous becomes a directory of this process, and
//       ranks that never come time out in 20 ms), or LeaveGroup when it names no group
//   tag bit 4     keep the request's own session id instead of the fuzz session's
//   tag bit 5     the client cancels (Execute, Backward, put, programs) after (tag >> 6)
//   cancellation polls put stream    the payload is frames [u16 length LE][serialized
//   PutTensorRequest]; a frame
//                 that does not parse ends the stream as a cancelled client would.
//
// Besides "no crash, no sanitizer report", these properties are checked:
// - every failure converts to a typed gRPC status: same code, a google.rpc.Status in the
//   details with an ErrorInfo (domain "tensord", a known reason), never INTERNAL or UNKNOWN;
// - a failed call changes nothing (GetSessionInfo byte-for-byte as before): batches,
//   backward, puts, releases and context calls are atomic; reads change nothing either way;
// - a get streams exactly its TensorInfo's byte count; a release removes its handles; a
//   gradient has its leaf's dtype and shape; a compiled program lists one call per forward
//   call and update, and a run answers with one result per call and one gradient per leaf
//   when it fetches them;
// - after the sequence, with every handle and program released and every context closed,
//   the session holds no memory, and it serves a fresh batch.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "server/service/grpc_status.h"
#include "server/service/service_core.h"
#include "tensord/v1/errors.pb.h"
#include "tensord/v1/service.pb.h"

namespace tensord {
namespace {

constexpr int kRpcCount = 16;
constexpr int kMaxSteps = 16;
constexpr uint8_t kKeepSessionId = 0x10;
constexpr uint8_t kCancel = 0x20;

// Shared memory objects of this process: every key the fuzzer registers is put under this
// prefix, so no input opens an object of another process on the machine.
const std::string& ShmPrefix() {
  static const std::string* prefix =
      new std::string("/tensord-fuzz-" + std::to_string(getpid()) + "-");
  return *prefix;
}

// The one object the keys can name, made once per process (and unlinked at exit).
void MakeShmObject() {
  const std::string key = ShmPrefix() + "a";
  const int fd = shm_open(key.c_str(), O_RDWR | O_CREAT, 0600);
  if (fd < 0 || ftruncate(fd, 4096) != 0) {
    std::fprintf(stderr, "request_fuzzer: cannot make %s\n", key.c_str());
    std::abort();
  }
  close(fd);
  static const std::string* unlink_key = new std::string(key);
  std::atexit([] { shm_unlink(unlink_key->c_str()); });
}

// A fresh rendezvous directory of this process (a group's name is used once per store).
std::string RendezvousDir(int n) {
  static const std::string* base = [] {
    char dir[] = "/tmp/tensord-fuzz-rendezvous-XXXXXX";
    if (mkdtemp(dir) == nullptr) std::abort();
    return new std::string(dir);
  }();
  const std::string dir = *base + "/" + std::to_string(n);
  mkdir(dir.c_str(), 0700);
  return dir;
}

ServiceConfig FuzzConfig() {
  ServiceConfig config;
  config.shared_memory.enabled = true;
  config.shared_memory.key_prefix = ShmPrefix();
  // A small quota bounds the work one input can ask for (shapes are the fuzzer's to choose),
  // so a slow input is a real finding, not a 4 GiB matmul.
  config.default_quota_bytes = int64_t{16} << 20;
  config.max_quota_bytes = int64_t{16} << 20;
  config.max_message_bytes = 4 << 20;
  // Sessions are closed explicitly; the reaper would only add a thread racing nothing.
  config.reap_interval = absl::Hours(1);
  // A group whose other ranks never come fails fast.
  config.collectives.timeout = std::chrono::milliseconds(20);
  config.collectives.address = "127.0.0.1";
  return config;
}

ServiceCore& Core() {
  // Built once per process: the op catalog and backends are the expensive part. Never
  // destroyed, so no input runs against a core that is shutting down.
  static ServiceCore* core = [] {
    MakeShmObject();
    return new ServiceCore(FuzzConfig());
  }();
  return *core;
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "request_fuzzer: %s\n", what.c_str());
  std::abort();
}

void Check(const absl::Status& status, const char* what) {
  if (!status.ok()) Fail(std::string("fixture step '") + what + "' failed: " + status.ToString());
}

const ServiceCore::Cancelled kNeverCancelled = [] { return false; };

// One request through a stream of messages.
std::function<bool(v1::PutTensorRequest*)> Feed(const std::vector<v1::PutTensorRequest>& msgs,
                                                size_t& next) {
  return [&msgs, &next](v1::PutTensorRequest* m) {
    if (next == msgs.size()) return false;
    *m = msgs[next++];
    return true;
  };
}

// The fixture every input starts from, made through the RPCs themselves:
//   handle 1  f32 [2, 3]            handle 2  i64 [3]
//   context 1 (NONE)                handle 3  f32 [2, 3] requires-grad leaf of context 1
//   handle 4  bool [2, 3]
// A fresh session per input keeps every input reproducible on its own (a crash found after a
// million inputs replays from its file alone).
std::string NewSession() {
  ServiceCore& core = Core();
  v1::CreateSessionResponse created;
  Check(core.CreateSession(v1::CreateSessionRequest(), "fuzz", &created), "create session");
  const std::string& id = created.session_id();

  auto put = [&](v1::DType dtype, std::vector<int64_t> shape, std::string data, bool grad,
                 uint64_t ctx) {
    std::vector<v1::PutTensorRequest> msgs(2);
    v1::PutHeader* h = msgs[0].mutable_header();
    h->set_session_id(id);
    h->set_dtype(dtype);
    for (int64_t d : shape) h->add_shape(d);
    h->set_requires_grad(grad);
    h->set_context_id(ctx);
    msgs[1].set_chunk(std::move(data));
    size_t next = 0;
    v1::PutTensorResponse resp;
    Check(core.PutTensor(Feed(msgs, next), kNeverCancelled, &resp), "put");
  };
  const float f[6] = {0.5f, -1.25f, 2.0f, 3.5f, -0.75f, 1.0f};
  const int64_t i[3] = {2, -1, 0};
  const bool b[6] = {true, false, true, true, false, false};
  const std::string fbytes(reinterpret_cast<const char*>(f), sizeof(f));
  put(v1::DTYPE_F32, {2, 3}, fbytes, false, 0);
  put(v1::DTYPE_I64, {3}, std::string(reinterpret_cast<const char*>(i), sizeof(i)), false, 0);
  v1::OpenAutodiffContextRequest open;
  open.set_session_id(id);
  v1::OpenAutodiffContextResponse opened;
  Check(core.OpenAutodiffContext(open, &opened), "open context");
  put(v1::DTYPE_F32, {2, 3}, fbytes, true, opened.context_id());
  put(v1::DTYPE_BOOL, {2, 3}, std::string(reinterpret_cast<const char*>(b), sizeof(b)), false, 0);
  return id;
}

v1::GetSessionInfoResponse Info(const std::string& id) {
  v1::GetSessionInfoRequest req;
  req.set_session_id(id);
  v1::GetSessionInfoResponse resp;
  Check(Core().GetSessionInfo(req, &resp), "session info");
  return resp;
}

std::string Snapshot(const std::string& id) { return Info(id).SerializeAsString(); }

// REQUEST_FUZZER_VERBOSE=1 prints each call's status (to see what a seed or a crash file does).
const bool kVerbose = std::getenv("REQUEST_FUZZER_VERBOSE") != nullptr;

// The conversion every RPC ends in: a failure must come out as a typed tensord error.
void Convert(const char* rpc, const absl::Status& status) {
  if (kVerbose) std::fprintf(stderr, "request_fuzzer: %s: %s\n", rpc, status.ToString().c_str());
  const grpc::Status g = ToGrpcStatus(status);
  if (status.ok() != g.ok()) Fail("ToGrpcStatus changed ok-ness of " + status.ToString());
  if (status.ok()) return;
  if (status.code() == absl::StatusCode::kInternal || status.code() == absl::StatusCode::kUnknown) {
    Fail(std::string(rpc) + " failed with an untyped error: " + status.ToString());
  }
  google::rpc::Status details;
  if (!details.ParseFromString(g.error_details()) ||
      details.code() != static_cast<int>(g.error_code())) {
    Fail(std::string(rpc) + ": no google.rpc.Status of the code in " + status.ToString());
  }
  for (const google::protobuf::Any& any : details.details()) {
    google::rpc::ErrorInfo info;
    v1::ErrorReason reason;
    if (any.UnpackTo(&info) && info.domain() == "tensord" &&
        v1::ErrorReason_Parse(info.reason(), &reason) && reason != v1::ERROR_REASON_UNSPECIFIED) {
      return;
    }
  }
  Fail(std::string(rpc) + ": no tensord ErrorInfo in " + status.ToString());
}

// One step's request, with the fuzz session's id unless the input keeps its own.
template <typename Request>
bool Parse(const uint8_t* data, size_t size, bool keep_id, const std::string& session,
           Request* req) {
  if (!req->ParseFromArray(data, static_cast<int>(size))) return false;
  if (!keep_id) req->set_session_id(session);
  return true;
}

class Sequence {
 public:
  explicit Sequence(std::string session) : session_(std::move(session)) {}

  void Step(uint8_t tag, const uint8_t* data, size_t size) {
    keep_id_ = (tag & kKeepSessionId) != 0;
    polls_ = 0;
    cancel_after_ = (tag & kCancel) ? tag >> 6 : -1;
    switch ((tag & 0xf) % kRpcCount) {
      case 0:
        Execute(data, size, /*then_backward=*/false);
        break;
      case 1:
        Put(data, size);
        break;
      case 2:
        if (v1::BackwardRequest r; Parse(data, size, keep_id_, session_, &r)) Backward(r);
        break;
      case 3:
        Execute(data, size, /*then_backward=*/true);
        break;
      case 4:
        Unary<v1::OpenAutodiffContextRequest, v1::OpenAutodiffContextResponse>(
            data, size, "OpenAutodiffContext", &ServiceCore::OpenAutodiffContext);
        break;
      case 5:
        Unary<v1::CloseAutodiffContextRequest, v1::CloseAutodiffContextResponse>(
            data, size, "CloseAutodiffContext", &ServiceCore::CloseAutodiffContext);
        break;
      case 6:
        Release(data, size);
        break;
      case 7:
        if (v1::GetTensorRequest r; Parse(data, size, keep_id_, session_, &r)) Get(r);
        break;
      case 8:
        Unary<v1::KeepAliveRequest, v1::KeepAliveResponse>(data, size, "KeepAlive",
                                                           &ServiceCore::KeepAlive);
        break;
      case 9:
        if (v1::GetSessionInfoRequest r; Parse(data, size, keep_id_, session_, &r)) {
          v1::GetSessionInfoResponse resp;
          Convert("GetSessionInfo", Core().GetSessionInfo(r, &resp));
        }
        break;
      case 10:
        if (v1::CompileProgramRequest r; Parse(data, size, keep_id_, session_, &r)) Compile(r);
        break;
      case 11:
        if (v1::RunProgramRequest r; Parse(data, size, keep_id_, session_, &r)) Run(r);
        break;
      case 12:
        Unary<v1::ReleaseProgramRequest, v1::ReleaseProgramResponse>(data, size, "ReleaseProgram",
                                                                     &ServiceCore::ReleaseProgram);
        break;
      case 13:
        if (v1::RegisterSharedMemoryRequest r; Parse(data, size, keep_id_, session_, &r)) {
          std::string key = r.region().key();
          if (!key.empty() && key[0] == '/') key.erase(0, 1);
          r.mutable_region()->set_key(ShmPrefix() + key);
          v1::RegisterSharedMemoryResponse resp;
          Atomic("RegisterSharedMemory", r.session_id(), false,
                 [&] { return Core().RegisterSharedMemory(r, &resp); });
        }
        break;
      case 14:
        Unary<v1::UnregisterSharedMemoryRequest, v1::UnregisterSharedMemoryResponse>(
            data, size, "UnregisterSharedMemory", &ServiceCore::UnregisterSharedMemory);
        break;
      case 15:
        if (v1::JoinGroupRequest r; Parse(data, size, keep_id_, session_, &r)) {
          if (r.group().empty()) {
            v1::LeaveGroupRequest leave;
            leave.set_session_id(r.session_id());
            v1::LeaveGroupResponse left;
            Atomic("LeaveGroup", r.session_id(), false,
                   [&] { return Core().LeaveGroup(leave, &left); });
            break;
          }
          // Each join meets in a directory of its own, so no earlier input's keys are found.
          r.set_rendezvous("file://" + RendezvousDir(++joins_));
          v1::JoinGroupResponse resp;
          Atomic("JoinGroup", r.session_id(), false, [&] { return Core().JoinGroup(r, &resp); });
        }
        break;
    }
  }

  // Whatever the sequence did, the session still works and its accounting is whole: with
  // every handle and program released and every context closed it holds no memory, and it
  // serves a batch.
  void CheckUnharmed() {
    const v1::GetSessionInfoResponse info = Info(session_);
    for (const v1::ProgramInfo& p : info.programs()) {
      v1::ReleaseProgramRequest release;
      release.set_session_id(session_);
      release.set_program_id(p.program_id());
      v1::ReleaseProgramResponse released;
      Check(Core().ReleaseProgram(release, &released), "release program");
    }
    for (const v1::SharedMemoryInfo& region : info.shared_memory()) {
      v1::UnregisterSharedMemoryRequest unregister;
      unregister.set_session_id(session_);
      unregister.set_name(region.name());
      v1::UnregisterSharedMemoryResponse unregistered;
      Check(Core().UnregisterSharedMemory(unregister, &unregistered), "unregister");
    }
    for (const v1::ContextInfo& c : info.contexts()) {
      if (c.state() != "open") continue;
      v1::CloseAutodiffContextRequest close;
      close.set_session_id(session_);
      close.set_context_id(c.context_id());
      v1::CloseAutodiffContextResponse closed;
      Check(Core().CloseAutodiffContext(close, &closed), "close context");
    }
    v1::ReleaseRequest release;
    release.set_session_id(session_);
    const v1::GetSessionInfoResponse live = Info(session_);
    for (const v1::TensorInfo& t : live.tensors()) release.add_handles(t.handle());
    v1::ReleaseResponse released;
    if (release.handles_size() > 0) Check(Core().Release(release, &released), "release all");
    const v1::GetSessionInfoResponse empty = Info(session_);
    if (empty.memory_used_bytes() != 0 || empty.tensors_size() != 0 || empty.programs_size() != 0) {
      Fail("the session holds " + std::to_string(empty.memory_used_bytes()) + " bytes in " +
           std::to_string(empty.tensors_size()) + " tensors after releasing every handle");
    }
    v1::ExecuteRequest r;
    r.set_session_id(session_);
    v1::OpCall* c = r.add_calls();
    c->set_op("neg");
    v1::TensorData* lit = c->add_inputs()->mutable_literal();
    lit->set_dtype(v1::DTYPE_F32);
    lit->add_shape(1);
    const float one = 1;
    lit->set_data(&one, sizeof(one));
    c->set_fetch(true);
    v1::ExecuteResponse resp;
    const absl::Status s = Core().Execute(r, kNeverCancelled, &resp);
    if (!s.ok() || resp.results_size() != 1 || resp.results(0).values_size() != 1) {
      Fail("the session does not serve a batch after the sequence: " + s.ToString());
    }
  }

 private:
  ServiceCore::Cancelled Cancelled() {
    return [this] { return cancel_after_ >= 0 && polls_++ >= cancel_after_; };
  }

  // Runs `call`; a failure must leave the fuzz session exactly as it was (when the request
  // named it), a read must leave it so either way.
  void Atomic(const char* rpc, const std::string& target, bool read_only,
              const std::function<absl::Status()>& call) {
    const bool own = target == session_;
    const std::string before = own ? Snapshot(session_) : std::string();
    const absl::Status status = call();
    Convert(rpc, status);
    if (own && (read_only || !status.ok()) && Snapshot(session_) != before) {
      Fail(std::string(rpc) + (status.ok() ? " (a read)" : " failed and") +
           " changed the session: " + status.ToString());
    }
  }

  template <typename Request, typename Response>
  void Unary(const uint8_t* data, size_t size, const char* rpc,
             absl::Status (ServiceCore::*method)(const Request&, Response*)) {
    Request req;
    if (!Parse(data, size, keep_id_, session_, &req)) return;
    Response resp;
    Atomic(rpc, req.session_id(), false, [&] { return (Core().*method)(req, &resp); });
  }

  void Execute(const uint8_t* data, size_t size, bool then_backward) {
    v1::ExecuteRequest req;
    if (!Parse(data, size, keep_id_, session_, &req)) return;
    v1::ExecuteResponse resp;
    absl::Status status;
    Atomic("Execute", req.session_id(), false, [&] {
      status = Core().Execute(req, Cancelled(), &resp);
      return status;
    });
    if (!status.ok() || !then_backward) return;
    v1::BackwardRequest bw;
    bw.set_session_id(req.session_id());
    bw.set_context_id(req.context_id() ? req.context_id() : 1);
    // Roots without seeds must have one element; other autodiff outputs are intermediates.
    for (const v1::CallResult& r : resp.results()) {
      for (const v1::TensorInfo& out : r.outputs()) {
        int64_t n = 1;
        for (int64_t d : out.shape()) n *= d;
        if (out.requires_grad() && n == 1) bw.add_roots(out.handle());
      }
    }
    if (bw.roots_size() > 0) Backward(bw);
  }

  void Backward(const v1::BackwardRequest& req) {
    const bool own = req.session_id() == session_;
    const v1::GetSessionInfoResponse before = own ? Info(session_) : v1::GetSessionInfoResponse();
    v1::BackwardResponse resp;
    absl::Status status;
    Atomic("Backward", req.session_id(), false, [&] {
      status = Core().Backward(req, Cancelled(), &resp);
      return status;
    });
    if (!status.ok() || !own) return;
    for (const v1::Gradient& g : resp.gradients()) {
      auto leaf = std::find_if(before.tensors().begin(), before.tensors().end(),
                               [&](const v1::TensorInfo& t) { return t.handle() == g.leaf(); });
      if (leaf == before.tensors().end() || leaf->dtype() != g.grad().dtype() ||
          !std::equal(leaf->shape().begin(), leaf->shape().end(), g.grad().shape().begin(),
                      g.grad().shape().end())) {
        Fail("a gradient does not match its leaf " + std::to_string(g.leaf()));
      }
    }
  }

  // A compiled program lists one call per forward call and update; it then runs once on its
  // own examples (which may still fail: a handle the forward writes in place, a context).
  void Compile(const v1::CompileProgramRequest& req) {
    v1::CompileProgramResponse resp;
    absl::Status status;
    Atomic("CompileProgram", req.session_id(), false, [&] {
      status = Core().CompileProgram(req, Cancelled(), &resp);
      return status;
    });
    if (!status.ok()) return;
    if (resp.calls_size() != req.calls_size() + req.updates_size()) {
      Fail("a compiled program lists " + std::to_string(resp.calls_size()) + " calls of " +
           std::to_string(req.calls_size() + req.updates_size()));
    }
    v1::RunProgramRequest run;
    run.set_session_id(req.session_id());
    run.set_program_id(resp.program_id());
    for (const v1::ProgramParameter& p : req.parameters()) *run.add_inputs() = p.example();
    polls_ = 0;
    Run(run);
  }

  // A run answers with one result per call and, when the backward fetches them, one gradient
  // per leaf; the program's run count goes up by one.
  void Run(const v1::RunProgramRequest& req) {
    const bool own = req.session_id() == session_;
    const v1::GetSessionInfoResponse before = own ? Info(session_) : v1::GetSessionInfoResponse();
    v1::RunProgramResponse resp;
    absl::Status status;
    Atomic("RunProgram", req.session_id(), false, [&] {
      status = Core().RunProgram(req, Cancelled(), &resp);
      return status;
    });
    if (!status.ok() || !own) return;
    auto program =
        std::find_if(before.programs().begin(), before.programs().end(),
                     [&](const v1::ProgramInfo& p) { return p.program_id() == req.program_id(); });
    if (program == before.programs().end()) Fail("a run of an unlisted program succeeded");
    if (resp.results_size() != static_cast<int>(program->calls() + program->updates())) {
      Fail("a run answered " + std::to_string(resp.results_size()) + " results for " +
           std::to_string(program->calls() + program->updates()) + " calls");
    }
    if (resp.gradients_size() != 0 && !program->backward()) {
      Fail("a run without a backward returned gradients");
    }
    const v1::GetSessionInfoResponse after = Info(session_);
    for (const v1::ProgramInfo& p : after.programs()) {
      if (p.program_id() == req.program_id() && p.runs() != program->runs() + 1) {
        Fail("a committed run did not count: " + std::to_string(p.runs()));
      }
    }
  }

  void Put(const uint8_t* data, size_t size) {
    std::vector<v1::PutTensorRequest> msgs;
    bool client_gone = false;
    std::string target = session_;
    while (size >= 2) {
      const size_t len = std::min<size_t>(size - 2, data[0] | (size_t{data[1]} << 8));
      v1::PutTensorRequest msg;
      if (!msg.ParseFromArray(data + 2, static_cast<int>(len))) {
        client_gone = true;
        break;
      }
      if (msg.has_header()) {
        if (!keep_id_) msg.mutable_header()->set_session_id(session_);
        if (msgs.empty()) target = msg.header().session_id();
      }
      msgs.push_back(std::move(msg));
      data += 2 + len;
      size -= 2 + len;
    }
    size_t next = 0;
    v1::PutTensorResponse resp;
    const ServiceCore::Cancelled cancelled = Cancelled();
    absl::Status status;
    Atomic("PutTensor", target, false, [&] {
      status = Core().PutTensor(
          Feed(msgs, next), [&] { return (client_gone && next == msgs.size()) || cancelled(); },
          &resp);
      return status;
    });
    if (!status.ok()) return;
    // Read the stored tensor back in small chunks: the get path and the put's bookkeeping.
    v1::GetTensorRequest get;
    get.set_session_id(target);
    get.set_handle(resp.tensor().handle());
    get.set_chunk_bytes(7);
    if (Get(get) != resp.tensor().nbytes()) Fail("a put's tensor reads back another size");
  }

  // The bytes moved; checks they are as many as the stream's TensorInfo says: all streamed,
  // or none when they went to a shared memory region.
  uint64_t Get(const v1::GetTensorRequest& req) {
    uint64_t got = 0;
    int64_t announced = -1;
    absl::Status status;
    Atomic("GetTensor", req.session_id(), true, [&] {
      status = Core().GetTensor(req, [&](const v1::GetTensorResponse& m) {
        if (m.has_info()) {
          if (announced >= 0) Fail("GetTensor sent a second TensorInfo");
          announced = static_cast<int64_t>(m.info().nbytes());
        }
        got += m.chunk().size();
        return true;
      });
      return status;
    });
    if (req.has_shared_memory()) {
      if (got != 0) Fail("GetTensor to shared memory streamed " + std::to_string(got) + " bytes");
      if (status.ok() && announced < 0) Fail("GetTensor to shared memory sent no TensorInfo");
      return status.ok() ? static_cast<uint64_t>(announced) : 0;
    }
    if (status.ok() && static_cast<int64_t>(got) != announced) {
      Fail("GetTensor streamed " + std::to_string(got) + " bytes of a tensor of " +
           std::to_string(announced));
    }
    return got;
  }

  void Release(const uint8_t* data, size_t size) {
    v1::ReleaseRequest req;
    if (!Parse(data, size, keep_id_, session_, &req)) return;
    v1::ReleaseResponse resp;
    absl::Status status;
    Atomic("Release", req.session_id(), false, [&] {
      status = Core().Release(req, &resp);
      return status;
    });
    if (!status.ok() || req.session_id() != session_) return;
    const v1::GetSessionInfoResponse after = Info(session_);
    for (const v1::TensorInfo& t : after.tensors()) {
      if (std::count(req.handles().begin(), req.handles().end(), t.handle())) {
        Fail("a released handle is still listed: " + std::to_string(t.handle()));
      }
    }
  }

  const std::string session_;
  bool keep_id_ = false;
  int polls_ = 0;
  int cancel_after_ = -1;
  int joins_ = 0;
};

}  // namespace
}  // namespace tensord

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensord;
  const std::string session = NewSession();
  Sequence sequence(session);
  for (int step = 0; step < kMaxSteps && size >= 3; ++step) {
    const uint8_t tag = data[0];
    const size_t len = std::min<size_t>(size - 3, data[1] | (size_t{data[2]} << 8));
    sequence.Step(tag, data + 3, len);
    data += 3 + len;
    size -= 3 + len;
  }
  sequence.CheckUnharmed();
  v1::CloseSessionRequest close;
  close.set_session_id(session);
  v1::CloseSessionResponse closed;
  Check(Core().CloseSession(close, &closed), "close session");
  return 0;
}
