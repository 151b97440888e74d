#include "server/service/tensord_service.h"

#include <utility>

#include "server/core/status.h"
#include "server/service/grpc_status.h"

namespace tensord {
namespace {

ServiceCore::Cancelled CancelledFn(grpc::ServerContext* ctx) {
  return [ctx] { return ctx->IsCancelled(); };
}

}  // namespace

absl::StatusOr<std::string> TensordService::Tenant(const grpc::ServerContext& ctx) {
  // One read of the table per call: a reload swaps the table, never changes one in use.
  const std::shared_ptr<const TokenTable> tokens =
      tokens_ == nullptr ? nullptr : tokens_->Current();
  return Authenticate(tokens.get(), cert_field_, ctx);
}

absl::Status TensordService::Admit(const grpc::ServerContext& ctx, const std::string& session_id,
                                   bool closing) {
  std::string tenant;
  ASSIGN_OR_RETURN(tenant, Tenant(ctx));
  return core_.sessions().CheckTenant(tenant, session_id, closing);
}

grpc::Status TensordService::CreateSession(grpc::ServerContext* ctx,
                                           const v1::CreateSessionRequest* req,
                                           v1::CreateSessionResponse* resp) {
  absl::StatusOr<std::string> tenant = Tenant(*ctx);
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  return ToGrpcStatus(core_.CreateSession(*req, *tenant, resp));
}

grpc::Status TensordService::KeepAlive(grpc::ServerContext* ctx, const v1::KeepAliveRequest* req,
                                       v1::KeepAliveResponse* resp) {
  if (absl::Status st = Admit(*ctx, req->session_id()); !st.ok()) return ToGrpcStatus(st);
  return ToGrpcStatus(core_.KeepAlive(*req, resp));
}

grpc::Status TensordService::CloseSession(grpc::ServerContext* ctx,
                                          const v1::CloseSessionRequest* req,
                                          v1::CloseSessionResponse* resp) {
  if (absl::Status st = Admit(*ctx, req->session_id(), /*closing=*/true); !st.ok()) {
    return ToGrpcStatus(st);
  }
  return ToGrpcStatus(core_.CloseSession(*req, resp));
}

grpc::Status TensordService::GetSessionInfo(grpc::ServerContext* ctx,
                                            const v1::GetSessionInfoRequest* req,
                                            v1::GetSessionInfoResponse* resp) {
  if (absl::Status st = Admit(*ctx, req->session_id()); !st.ok()) return ToGrpcStatus(st);
  return ToGrpcStatus(core_.GetSessionInfo(*req, resp));
}

grpc::Status TensordService::ListDevices(grpc::ServerContext* ctx,
                                         const v1::ListDevicesRequest* req,
                                         v1::ListDevicesResponse* resp) {
  if (auto tenant = Tenant(*ctx); !tenant.ok()) return ToGrpcStatus(tenant.status());
  return ToGrpcStatus(core_.ListDevices(*req, resp));
}

grpc::Status TensordService::ListOps(grpc::ServerContext* ctx, const v1::ListOpsRequest* req,
                                     v1::ListOpsResponse* resp) {
  if (auto tenant = Tenant(*ctx); !tenant.ok()) return ToGrpcStatus(tenant.status());
  return ToGrpcStatus(core_.ListOps(*req, resp));
}

grpc::Status TensordService::PutTensor(grpc::ServerContext* ctx,
                                       grpc::ServerReader<v1::PutTensorRequest>* reader,
                                       v1::PutTensorResponse* resp) {
  // Authenticated before a byte of the stream is read.
  absl::StatusOr<std::string> tenant = Tenant(*ctx);
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  // The session is named in the first message: read it here for the tenant check and hand
  // it to the core as the stream's first message.
  v1::PutTensorRequest first;
  bool pending = reader->Read(&first);
  if (pending && first.has_header()) {
    absl::Status st = core_.sessions().CheckTenant(*tenant, first.header().session_id());
    if (!st.ok()) return ToGrpcStatus(st);
  }
  auto next = [reader, &first, &pending](v1::PutTensorRequest* msg) {
    if (pending) {
      pending = false;
      *msg = std::move(first);
      return true;
    }
    return reader->Read(msg);
  };
  return ToGrpcStatus(core_.PutTensor(next, CancelledFn(ctx), resp));
}

grpc::Status TensordService::GetTensor(grpc::ServerContext* ctx, const v1::GetTensorRequest* req,
                                       grpc::ServerWriter<v1::GetTensorResponse>* writer) {
  if (absl::Status st = Admit(*ctx, req->session_id()); !st.ok()) return ToGrpcStatus(st);
  auto write = [writer](const v1::GetTensorResponse& msg) { return writer->Write(msg); };
  return ToGrpcStatus(core_.GetTensor(*req, write));
}

grpc::Status TensordService::Execute(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                                     v1::ExecuteResponse* resp) {
  if (absl::Status st = Admit(*ctx, req->session_id()); !st.ok()) return ToGrpcStatus(st);
  return ToGrpcStatus(core_.Execute(*req, CancelledFn(ctx), resp));
}

grpc::Status TensordService::Release(grpc::ServerContext* ctx, const v1::ReleaseRequest* req,
                                     v1::ReleaseResponse* resp) {
  if (absl::Status st = Admit(*ctx, req->session_id()); !st.ok()) return ToGrpcStatus(st);
  return ToGrpcStatus(core_.Release(*req, resp));
}

grpc::Status TensordService::OpenAutodiffContext(grpc::ServerContext* ctx,
                                                 const v1::OpenAutodiffContextRequest* req,
                                                 v1::OpenAutodiffContextResponse* resp) {
  if (absl::Status st = Admit(*ctx, req->session_id()); !st.ok()) return ToGrpcStatus(st);
  return ToGrpcStatus(core_.OpenAutodiffContext(*req, resp));
}

grpc::Status TensordService::CloseAutodiffContext(grpc::ServerContext* ctx,
                                                  const v1::CloseAutodiffContextRequest* req,
                                                  v1::CloseAutodiffContextResponse* resp) {
  if (absl::Status st = Admit(*ctx, req->session_id()); !st.ok()) return ToGrpcStatus(st);
  return ToGrpcStatus(core_.CloseAutodiffContext(*req, resp));
}

grpc::Status TensordService::Backward(grpc::ServerContext* ctx, const v1::BackwardRequest* req,
                                      v1::BackwardResponse* resp) {
  if (absl::Status st = Admit(*ctx, req->session_id()); !st.ok()) return ToGrpcStatus(st);
  return ToGrpcStatus(core_.Backward(*req, CancelledFn(ctx), resp));
}

}  // namespace tensord
