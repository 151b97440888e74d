#include "server/service/tensord_service.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <utility>

#include "google/protobuf/arena.h"
#include "server/core/status.h"
#include "server/service/grpc_status.h"
#include "server/service/rpc_call.h"

namespace tensord {
namespace {

// How often a running call asks gRPC whether its client has gone.
constexpr std::chrono::microseconds kCancelPollInterval{1000};
// The first block of an Execute's arena: a batch of a few calls, its response included, fits
// in it; larger batches add blocks as they grow.
constexpr size_t kExecuteArenaBlockBytes = 8 << 10;

// The synchronous server's IsCancelled runs a pass of the call's completion-queue pollset (a
// futex wake and wait): about 80 µs on a 2-core machine, more than a small op costs, and a
// batch asks before every call. So IsCancelled is asked at most once per kCancelPollInterval,
// from the call's first millisecond on, and on every poll once the deadline (a clock read) has
// passed. A cancelled client is noticed within that interval (plus the op running then).
ServiceCore::Cancelled CancelledFn(grpc::ServerContext* ctx) {
  struct Poll {
    std::atomic<bool> cancelled{false};
    std::atomic<int64_t> next_poll_ns;
  };
  using Clock = std::chrono::steady_clock;
  auto since_epoch = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
  };
  auto poll = std::make_shared<Poll>();
  poll->next_poll_ns = since_epoch() + std::chrono::nanoseconds(kCancelPollInterval).count();
  const std::chrono::system_clock::time_point deadline = ctx->deadline();
  return [ctx, poll, deadline, since_epoch] {
    if (poll->cancelled.load(std::memory_order_relaxed)) return true;
    // Past the deadline gRPC is about to cancel the call (its timer may not have fired yet):
    // ask on every poll then, so the call stops as soon as gRPC says so, and with gRPC's own
    // DEADLINE_EXCEEDED rather than a cancellation the server made up.
    const bool past_deadline = std::chrono::system_clock::now() >= deadline;
    const int64_t now = since_epoch();
    int64_t next = poll->next_poll_ns.load(std::memory_order_relaxed);
    if (!past_deadline) {
      if (now < next) return false;
      // One thread polls; others keep going until the next interval.
      if (!poll->next_poll_ns.compare_exchange_strong(
              next, now + std::chrono::nanoseconds(kCancelPollInterval).count())) {
        return false;
      }
    }
    if (ctx->IsCancelled()) poll->cancelled = true;
    return poll->cancelled.load();
  };
}

// The call's status, with the response's size counted when it succeeded.
grpc::Status Done(RpcCall& call, absl::Status status, const google::protobuf::Message* resp) {
  if (status.ok() && resp != nullptr)
    call.add_bytes_out(static_cast<int64_t>(resp->ByteSizeLong()));
  return call.Finish(std::move(status));
}

}  // namespace

absl::StatusOr<std::string> TensordService::Tenant(const grpc::ServerContext& ctx) {
  // One read of the table per call: a reload swaps the table, never changes one in use.
  const TokenTable* tokens = tokens_ == nullptr ? nullptr : tokens_->Current().get();
  return Authenticate(tokens, cert_field_, ctx);
}

absl::Status TensordService::Admit(RpcCall& call, const grpc::ServerContext& ctx,
                                   const std::string& session_id, bool closing) {
  call.set_session(session_id);
  std::string tenant;
  ASSIGN_OR_RETURN(tenant, Tenant(ctx));
  call.set_tenant(tenant);
  return core_.sessions().CheckTenant(tenant, session_id, closing);
}

// Each handler: one RpcCall (request id, log line, metrics), admission, then the core.
grpc::Status TensordService::CreateSession(grpc::ServerContext* ctx,
                                           const v1::CreateSessionRequest* req,
                                           v1::CreateSessionResponse* resp) {
  RpcCall call(ctx, "CreateSession", core_.metrics());
  call.add_bytes_in(static_cast<int64_t>(req->ByteSizeLong()));
  absl::StatusOr<std::string> tenant = Tenant(*ctx);
  if (!tenant.ok()) return Done(call, tenant.status(), nullptr);
  call.set_tenant(*tenant);
  absl::Status st = core_.CreateSession(*req, *tenant, resp);
  if (st.ok()) call.set_session(resp->session_id());
  return Done(call, std::move(st), resp);
}

template <typename Request, typename Response>
grpc::Status TensordService::SessionCall(grpc::ServerContext* ctx, absl::string_view method,
                                         const Request& req, Response* resp,
                                         CoreMethod<Request, Response> run, bool closing) {
  RpcCall call(ctx, method, core_.metrics());
  call.add_bytes_in(static_cast<int64_t>(req.ByteSizeLong()));
  absl::Status st = Admit(call, *ctx, req.session_id(), closing);
  if (st.ok()) st = (core_.*run)(req, resp);
  return Done(call, std::move(st), resp);
}

grpc::Status TensordService::KeepAlive(grpc::ServerContext* ctx, const v1::KeepAliveRequest* req,
                                       v1::KeepAliveResponse* resp) {
  return SessionCall(ctx, "KeepAlive", *req, resp, &ServiceCore::KeepAlive);
}

grpc::Status TensordService::CloseSession(grpc::ServerContext* ctx,
                                          const v1::CloseSessionRequest* req,
                                          v1::CloseSessionResponse* resp) {
  return SessionCall(ctx, "CloseSession", *req, resp, &ServiceCore::CloseSession,
                     /*closing=*/true);
}

grpc::Status TensordService::GetSessionInfo(grpc::ServerContext* ctx,
                                            const v1::GetSessionInfoRequest* req,
                                            v1::GetSessionInfoResponse* resp) {
  return SessionCall(ctx, "GetSessionInfo", *req, resp, &ServiceCore::GetSessionInfo);
}

grpc::Status TensordService::Release(grpc::ServerContext* ctx, const v1::ReleaseRequest* req,
                                     v1::ReleaseResponse* resp) {
  return SessionCall(ctx, "Release", *req, resp, &ServiceCore::Release);
}

grpc::Status TensordService::OpenAutodiffContext(grpc::ServerContext* ctx,
                                                 const v1::OpenAutodiffContextRequest* req,
                                                 v1::OpenAutodiffContextResponse* resp) {
  return SessionCall(ctx, "OpenAutodiffContext", *req, resp, &ServiceCore::OpenAutodiffContext);
}

grpc::Status TensordService::CloseAutodiffContext(grpc::ServerContext* ctx,
                                                  const v1::CloseAutodiffContextRequest* req,
                                                  v1::CloseAutodiffContextResponse* resp) {
  return SessionCall(ctx, "CloseAutodiffContext", *req, resp, &ServiceCore::CloseAutodiffContext);
}

grpc::Status TensordService::ListDevices(grpc::ServerContext* ctx,
                                         const v1::ListDevicesRequest* req,
                                         v1::ListDevicesResponse* resp) {
  RpcCall call(ctx, "ListDevices", core_.metrics());
  absl::StatusOr<std::string> tenant = Tenant(*ctx);
  if (!tenant.ok()) return Done(call, tenant.status(), nullptr);
  call.set_tenant(*tenant);
  return Done(call, core_.ListDevices(*req, resp), resp);
}

grpc::Status TensordService::ListOps(grpc::ServerContext* ctx, const v1::ListOpsRequest* req,
                                     v1::ListOpsResponse* resp) {
  RpcCall call(ctx, "ListOps", core_.metrics());
  absl::StatusOr<std::string> tenant = Tenant(*ctx);
  if (!tenant.ok()) return Done(call, tenant.status(), nullptr);
  call.set_tenant(*tenant);
  return Done(call, core_.ListOps(*req, resp), resp);
}

grpc::Status TensordService::PutTensor(grpc::ServerContext* ctx,
                                       grpc::ServerReader<v1::PutTensorRequest>* reader,
                                       v1::PutTensorResponse* resp) {
  RpcCall call(ctx, "PutTensor", core_.metrics());
  // Authenticated before a byte of the stream is read.
  absl::StatusOr<std::string> tenant = Tenant(*ctx);
  if (!tenant.ok()) return Done(call, tenant.status(), nullptr);
  call.set_tenant(*tenant);
  // The session is named in the first message: read it here for the tenant check and hand
  // it to the core as the stream's first message.
  v1::PutTensorRequest first;
  bool pending = reader->Read(&first);
  if (pending) call.add_bytes_in(static_cast<int64_t>(first.ByteSizeLong()));
  if (pending && first.has_header()) {
    call.set_session(first.header().session_id());
    absl::Status st = core_.sessions().CheckTenant(*tenant, first.header().session_id());
    if (!st.ok()) return Done(call, std::move(st), nullptr);
  }
  auto next = [reader, &first, &pending, &call](v1::PutTensorRequest* msg) {
    if (pending) {
      pending = false;
      *msg = std::move(first);
      return true;
    }
    if (!reader->Read(msg)) return false;
    call.add_bytes_in(static_cast<int64_t>(msg->ByteSizeLong()));
    return true;
  };
  return Done(call, core_.PutTensor(next, CancelledFn(ctx), resp), resp);
}

grpc::Status TensordService::GetTensor(grpc::ServerContext* ctx, const v1::GetTensorRequest* req,
                                       grpc::ServerWriter<v1::GetTensorResponse>* writer) {
  RpcCall call(ctx, "GetTensor", core_.metrics());
  call.add_bytes_in(static_cast<int64_t>(req->ByteSizeLong()));
  if (absl::Status st = Admit(call, *ctx, req->session_id()); !st.ok()) {
    return Done(call, std::move(st), nullptr);
  }
  auto write = [writer, &call](const v1::GetTensorResponse& msg) {
    call.add_bytes_out(static_cast<int64_t>(msg.ByteSizeLong()));
    return writer->Write(msg);
  };
  return Done(call, core_.GetTensor(*req, write), nullptr);
}

grpc::Status TensordService::StreamedExecute(
    grpc::ServerContext* ctx,
    grpc::ServerUnaryStreamer<v1::ExecuteRequest, v1::ExecuteResponse>* stream) {
  RpcCall call(ctx, "Execute", core_.metrics());
  google::protobuf::ArenaOptions options;
  options.start_block_size = kExecuteArenaBlockBytes;
  google::protobuf::Arena arena(options);
  auto* req = google::protobuf::Arena::CreateMessage<v1::ExecuteRequest>(&arena);
  auto* resp = google::protobuf::Arena::CreateMessage<v1::ExecuteResponse>(&arena);
  if (!stream->Read(req)) {
    return Done(call,
                Error(Reason::kInvalidRequest,
                      "Execute: the request did not arrive or is not an ExecuteRequest"),
                nullptr);
  }
  call.add_bytes_in(static_cast<int64_t>(req->ByteSizeLong()));
  call.set_ops(req->calls_size());
  absl::Status st = Admit(call, *ctx, req->session_id());
  if (st.ok()) st = core_.Execute(*req, CancelledFn(ctx), resp);
  grpc::Status status = Done(call, std::move(st), resp);
  // Serialized now and sent with the status, as a unary call's response is. A client gone
  // before then ends the call as it would end a unary one.
  if (status.ok()) stream->WriteLast(*resp, grpc::WriteOptions());
  return status;
}

grpc::Status TensordService::Backward(grpc::ServerContext* ctx, const v1::BackwardRequest* req,
                                      v1::BackwardResponse* resp) {
  RpcCall call(ctx, "Backward", core_.metrics());
  call.add_bytes_in(static_cast<int64_t>(req->ByteSizeLong()));
  absl::Status st = Admit(call, *ctx, req->session_id());
  if (st.ok()) st = core_.Backward(*req, CancelledFn(ctx), resp);
  return Done(call, std::move(st), resp);
}

grpc::Status TensordService::CompileProgram(grpc::ServerContext* ctx,
                                            const v1::CompileProgramRequest* req,
                                            v1::CompileProgramResponse* resp) {
  RpcCall call(ctx, "CompileProgram", core_.metrics());
  call.add_bytes_in(static_cast<int64_t>(req->ByteSizeLong()));
  call.set_ops(req->calls_size() + req->updates_size());
  absl::Status st = Admit(call, *ctx, req->session_id());
  if (st.ok()) st = core_.CompileProgram(*req, CancelledFn(ctx), resp);
  return Done(call, std::move(st), resp);
}

grpc::Status TensordService::RunProgram(grpc::ServerContext* ctx, const v1::RunProgramRequest* req,
                                        v1::RunProgramResponse* resp) {
  RpcCall call(ctx, "RunProgram", core_.metrics());
  call.add_bytes_in(static_cast<int64_t>(req->ByteSizeLong()));
  absl::Status st = Admit(call, *ctx, req->session_id());
  if (st.ok()) st = core_.RunProgram(*req, CancelledFn(ctx), resp);
  return Done(call, std::move(st), resp);
}

grpc::Status TensordService::ReleaseProgram(grpc::ServerContext* ctx,
                                            const v1::ReleaseProgramRequest* req,
                                            v1::ReleaseProgramResponse* resp) {
  return SessionCall(ctx, "ReleaseProgram", *req, resp, &ServiceCore::ReleaseProgram);
}

grpc::Status TensordService::RegisterSharedMemory(grpc::ServerContext* ctx,
                                                  const v1::RegisterSharedMemoryRequest* req,
                                                  v1::RegisterSharedMemoryResponse* resp) {
  return SessionCall(ctx, "RegisterSharedMemory", *req, resp, &ServiceCore::RegisterSharedMemory);
}

grpc::Status TensordService::UnregisterSharedMemory(grpc::ServerContext* ctx,
                                                    const v1::UnregisterSharedMemoryRequest* req,
                                                    v1::UnregisterSharedMemoryResponse* resp) {
  return SessionCall(ctx, "UnregisterSharedMemory", *req, resp,
                     &ServiceCore::UnregisterSharedMemory);
}

grpc::Status TensordService::JoinGroup(grpc::ServerContext* ctx, const v1::JoinGroupRequest* req,
                                       v1::JoinGroupResponse* resp) {
  return SessionCall(ctx, "JoinGroup", *req, resp, &ServiceCore::JoinGroup);
}

grpc::Status TensordService::LeaveGroup(grpc::ServerContext* ctx, const v1::LeaveGroupRequest* req,
                                        v1::LeaveGroupResponse* resp) {
  return SessionCall(ctx, "LeaveGroup", *req, resp, &ServiceCore::LeaveGroup);
}

}  // namespace tensord
