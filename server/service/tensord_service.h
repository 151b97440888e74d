// The gRPC face of ServiceCore.
#pragma once

#include <memory>
#include <string>

#include "server/service/auth.h"
#include "server/service/service_core.h"
#include "server/service/token_store.h"
#include "tensord/v1/service.grpc.pb.h"

namespace tensord {

// Synchronous gRPC API, not the callback API: op calls and backward passes block on compute
// for as long as they run, and callback reactions must not block (they run on gRPC's own
// polling threads), so the callback API would need a second thread pool in front of the core.
// The synchronous server already runs every call on a pool thread sized by gRPC.
//
// Every handler first admits its call (Tenant, Admit): authentication when the server has tokens
// or takes tenants from certificates, then the tenant check of the session the request names.
// Health and reflection are other services and never pass through here.
class RpcCall;

// Execute runs as a streamed unary method (one request, one response, as on the wire of any
// unary call) so that its handler owns the messages: they live on a protobuf arena per call,
// and the many small messages of a batch (a call, its operands and attributes; a result per
// call) are carved from its blocks and freed at once instead of one malloc and free each.
class TensordService final
    : public v1::Tensord::WithStreamedUnaryMethod_Execute<v1::Tensord::Service> {
 public:
  // `tokens` null: no token authentication. With neither tokens nor a certificate field every
  // caller is kAnonymousTenant. `tokens` is not owned and must outlive the service.
  TensordService(ServiceCore& core, const TokenStore* tokens, CertTenantField cert_field)
      : core_(core), tokens_(tokens), cert_field_(cert_field) {}

  grpc::Status CreateSession(grpc::ServerContext* ctx, const v1::CreateSessionRequest* req,
                             v1::CreateSessionResponse* resp) override;
  grpc::Status KeepAlive(grpc::ServerContext* ctx, const v1::KeepAliveRequest* req,
                         v1::KeepAliveResponse* resp) override;
  grpc::Status CloseSession(grpc::ServerContext* ctx, const v1::CloseSessionRequest* req,
                            v1::CloseSessionResponse* resp) override;
  grpc::Status GetSessionInfo(grpc::ServerContext* ctx, const v1::GetSessionInfoRequest* req,
                              v1::GetSessionInfoResponse* resp) override;
  grpc::Status ListDevices(grpc::ServerContext* ctx, const v1::ListDevicesRequest* req,
                           v1::ListDevicesResponse* resp) override;
  grpc::Status ListOps(grpc::ServerContext* ctx, const v1::ListOpsRequest* req,
                       v1::ListOpsResponse* resp) override;
  grpc::Status PutTensor(grpc::ServerContext* ctx, grpc::ServerReader<v1::PutTensorRequest>* reader,
                         v1::PutTensorResponse* resp) override;
  grpc::Status GetTensor(grpc::ServerContext* ctx, const v1::GetTensorRequest* req,
                         grpc::ServerWriter<v1::GetTensorResponse>* writer) override;
  grpc::Status StreamedExecute(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<v1::ExecuteRequest, v1::ExecuteResponse>* stream) override;
  grpc::Status Release(grpc::ServerContext* ctx, const v1::ReleaseRequest* req,
                       v1::ReleaseResponse* resp) override;
  grpc::Status OpenAutodiffContext(grpc::ServerContext* ctx,
                                   const v1::OpenAutodiffContextRequest* req,
                                   v1::OpenAutodiffContextResponse* resp) override;
  grpc::Status CloseAutodiffContext(grpc::ServerContext* ctx,
                                    const v1::CloseAutodiffContextRequest* req,
                                    v1::CloseAutodiffContextResponse* resp) override;
  grpc::Status Backward(grpc::ServerContext* ctx, const v1::BackwardRequest* req,
                        v1::BackwardResponse* resp) override;
  grpc::Status CompileProgram(grpc::ServerContext* ctx, const v1::CompileProgramRequest* req,
                              v1::CompileProgramResponse* resp) override;
  grpc::Status RunProgram(grpc::ServerContext* ctx, const v1::RunProgramRequest* req,
                          v1::RunProgramResponse* resp) override;
  grpc::Status ReleaseProgram(grpc::ServerContext* ctx, const v1::ReleaseProgramRequest* req,
                              v1::ReleaseProgramResponse* resp) override;
  grpc::Status RegisterSharedMemory(grpc::ServerContext* ctx,
                                    const v1::RegisterSharedMemoryRequest* req,
                                    v1::RegisterSharedMemoryResponse* resp) override;
  grpc::Status UnregisterSharedMemory(grpc::ServerContext* ctx,
                                      const v1::UnregisterSharedMemoryRequest* req,
                                      v1::UnregisterSharedMemoryResponse* resp) override;
  grpc::Status JoinGroup(grpc::ServerContext* ctx, const v1::JoinGroupRequest* req,
                         v1::JoinGroupResponse* resp) override;
  grpc::Status LeaveGroup(grpc::ServerContext* ctx, const v1::LeaveGroupRequest* req,
                          v1::LeaveGroupResponse* resp) override;

 private:
  // The caller's tenant (UNAUTHENTICATED without valid credentials, PERMISSION_DENIED when the
  // token and the certificate disagree).
  absl::StatusOr<std::string> Tenant(const grpc::ServerContext& ctx);
  // The same, and SESSION_NOT_FOUND when `session_id` names another tenant's session; tells
  // `call` the tenant and session for its log line.
  absl::Status Admit(RpcCall& call, const grpc::ServerContext& ctx, const std::string& session_id,
                     bool closing = false);

  template <typename Request, typename Response>
  using CoreMethod = absl::Status (ServiceCore::*)(const Request&, Response*);
  // A call whose request names a session and whose response is one message: admission, the
  // core's method, the call's log line and metrics.
  template <typename Request, typename Response>
  grpc::Status SessionCall(grpc::ServerContext* ctx, absl::string_view method, const Request& req,
                           Response* resp, CoreMethod<Request, Response> run, bool closing = false);

  ServiceCore& core_;
  const TokenStore* const tokens_;
  const CertTenantField cert_field_;
};

}  // namespace tensord
