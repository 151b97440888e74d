// libFuzzer target: arbitrary bytes become ExecuteRequest / PutTensor stream messages and go
// through the same path a gRPC call takes (ServiceCore: decode → validate → dispatch → commit,
// then the one absl → grpc::Status conversion), in-process, with no network in between.
//
// Input layout (tests/fuzz/make_corpus.cc writes valid seeds in it):
//   byte 0      selector: bits 0-1 pick the call (0, 1: Execute; 2: put stream; 3: Execute
//               followed by Backward of its autodiff outputs); bit 2 keeps the request's own
//               session id instead of the fuzz session's (the lookup paths).
//   Execute     the rest is one serialized tensord.v1.ExecuteRequest.
//   put stream  the rest is frames [u16 little-endian length][serialized PutTensorRequest];
//               a frame that does not parse ends the stream as a cancelled client would.
//
// Beyond "no crash, no sanitizer report", one property is checked on every failed Execute:
// the batch is atomic, so the session looks exactly as before (GetSessionInfo is unchanged).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "server/service/grpc_status.h"
#include "server/service/service_core.h"
#include "tensord/v1/service.pb.h"

namespace tensord {
namespace {

constexpr uint8_t kCallMask = 0x3;
constexpr uint8_t kKeepSessionId = 0x4;

ServiceConfig FuzzConfig() {
  ServiceConfig config;
  // A small quota bounds the work one input can ask for (shapes are the fuzzer's to choose),
  // so a slow input is a real finding, not a 4 GiB matmul.
  config.default_quota_bytes = int64_t{16} << 20;
  config.max_quota_bytes = int64_t{16} << 20;
  config.max_message_bytes = 4 << 20;
  // Sessions are closed explicitly; the reaper would only add a thread racing nothing.
  config.reap_interval = absl::Hours(1);
  return config;
}

ServiceCore& Core() {
  // Built once per process: the op catalog and backends are the expensive part. Never
  // destroyed, so no input runs against a core that is shutting down.
  static ServiceCore* core = new ServiceCore(FuzzConfig());
  return *core;
}

void Check(const absl::Status& status, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "request_fuzzer: fixture step '%s' failed: %s\n", what,
               status.ToString().c_str());
  std::abort();
}

const ServiceCore::Cancelled kNeverCancelled = [] { return false; };

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
    Check(core.PutTensor(
              [&](v1::PutTensorRequest* m) {
                if (next == msgs.size()) return false;
                *m = msgs[next++];
                return true;
              },
              kNeverCancelled, &resp),
          "put");
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

std::string SessionSnapshot(const std::string& id) {
  v1::GetSessionInfoRequest req;
  req.set_session_id(id);
  v1::GetSessionInfoResponse resp;
  Check(Core().GetSessionInfo(req, &resp), "session info");
  std::string out;
  resp.SerializeToString(&out);
  return out;
}

// REQUEST_FUZZER_VERBOSE=1 prints each call's status (to see what a seed or a crash file does).
const bool kVerbose = std::getenv("REQUEST_FUZZER_VERBOSE") != nullptr;

// The conversion every RPC ends in; its output must be a well-formed status either way.
void Convert(const absl::Status& status) {
  if (kVerbose) std::fprintf(stderr, "request_fuzzer: %s\n", status.ToString().c_str());
  grpc::Status g = ToGrpcStatus(status);
  if (status.ok() != g.ok()) {
    std::fprintf(stderr, "request_fuzzer: ToGrpcStatus changed ok-ness of %s\n",
                 status.ToString().c_str());
    std::abort();
  }
}

void RunExecute(const std::string& session, const uint8_t* data, size_t size, bool keep_id,
                bool backward) {
  v1::ExecuteRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return;
  if (!keep_id) req.set_session_id(session);
  const bool own_session = req.session_id() == session;
  const std::string before = own_session ? SessionSnapshot(session) : std::string();
  v1::ExecuteResponse resp;
  absl::Status status = Core().Execute(req, kNeverCancelled, &resp);
  Convert(status);
  if (!status.ok()) {
    if (own_session && SessionSnapshot(session) != before) {
      std::fprintf(stderr, "request_fuzzer: failed batch changed the session: %s\n",
                   status.ToString().c_str());
      std::abort();
    }
    return;
  }
  std::string wire;
  resp.SerializeToString(&wire);
  if (!backward) return;
  v1::BackwardRequest bw;
  bw.set_session_id(session);
  bw.set_context_id(req.context_id() ? req.context_id() : 1);
  // Roots without seeds must have one element; other autodiff outputs are intermediates.
  for (const v1::CallResult& r : resp.results()) {
    for (const v1::TensorInfo& out : r.outputs()) {
      int64_t n = 1;
      for (int64_t d : out.shape()) n *= d;
      if (out.requires_grad() && n == 1) bw.add_roots(out.handle());
    }
  }
  if (bw.roots_size() == 0) return;
  v1::BackwardResponse grads;
  Convert(Core().Backward(bw, kNeverCancelled, &grads));
}

void RunPut(const std::string& session, const uint8_t* data, size_t size, bool keep_id) {
  std::vector<v1::PutTensorRequest> msgs;
  bool cancelled = false;
  while (size >= 2) {
    const size_t len = std::min<size_t>(size - 2, data[0] | (size_t{data[1]} << 8));
    v1::PutTensorRequest msg;
    if (!msg.ParseFromArray(data + 2, static_cast<int>(len))) {
      cancelled = true;
      break;
    }
    if (!keep_id && msg.has_header()) msg.mutable_header()->set_session_id(session);
    msgs.push_back(std::move(msg));
    data += 2 + len;
    size -= 2 + len;
  }
  size_t next = 0;
  v1::PutTensorResponse resp;
  absl::Status status = Core().PutTensor(
      [&](v1::PutTensorRequest* m) {
        if (next == msgs.size()) return false;
        *m = msgs[next++];
        return true;
      },
      [&] { return cancelled && next == msgs.size(); }, &resp);
  Convert(status);
  if (!status.ok()) return;
  // Read the stored tensor back in small chunks: the get path and the put's bookkeeping.
  v1::GetTensorRequest get;
  get.set_session_id(session);
  get.set_handle(resp.tensor().handle());
  get.set_chunk_bytes(7);
  uint64_t got = 0;
  Convert(Core().GetTensor(get, [&](const v1::GetTensorResponse& m) {
    got += m.chunk().size();
    return true;
  }));
  if (got != resp.tensor().nbytes()) {
    std::fprintf(stderr, "request_fuzzer: put stored %llu bytes, get returned %llu\n",
                 static_cast<unsigned long long>(resp.tensor().nbytes()),
                 static_cast<unsigned long long>(got));
    std::abort();
  }
}

}  // namespace
}  // namespace tensord

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensord;
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  const bool keep_id = (selector & kKeepSessionId) != 0;
  const std::string session = NewSession();
  switch (selector & kCallMask) {
    case 0:
    case 1:
      RunExecute(session, data + 1, size - 1, keep_id, /*backward=*/false);
      break;
    case 2:
      RunPut(session, data + 1, size - 1, keep_id);
      break;
    case 3:
      RunExecute(session, data + 1, size - 1, keep_id, /*backward=*/true);
      break;
  }
  v1::CloseSessionRequest close;
  close.set_session_id(session);
  v1::CloseSessionResponse closed;
  Check(Core().CloseSession(close, &closed), "close session");
  return 0;
}
