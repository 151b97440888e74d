#include "server/service/tensord_service.h"

#include "server/service/grpc_status.h"

namespace tensord {
namespace {

ServiceCore::Cancelled CancelledFn(grpc::ServerContext* ctx) {
  return [ctx] { return ctx->IsCancelled(); };
}

}  // namespace

grpc::Status TensordService::CreateSession(grpc::ServerContext*,
                                           const v1::CreateSessionRequest* req,
                                           v1::CreateSessionResponse* resp) {
  return ToGrpcStatus(core_.CreateSession(*req, resp));
}

grpc::Status TensordService::KeepAlive(grpc::ServerContext*, const v1::KeepAliveRequest* req,
                                       v1::KeepAliveResponse* resp) {
  return ToGrpcStatus(core_.KeepAlive(*req, resp));
}

grpc::Status TensordService::CloseSession(grpc::ServerContext*, const v1::CloseSessionRequest* req,
                                          v1::CloseSessionResponse* resp) {
  return ToGrpcStatus(core_.CloseSession(*req, resp));
}

grpc::Status TensordService::GetSessionInfo(grpc::ServerContext*,
                                            const v1::GetSessionInfoRequest* req,
                                            v1::GetSessionInfoResponse* resp) {
  return ToGrpcStatus(core_.GetSessionInfo(*req, resp));
}

grpc::Status TensordService::ListDevices(grpc::ServerContext*, const v1::ListDevicesRequest* req,
                                         v1::ListDevicesResponse* resp) {
  return ToGrpcStatus(core_.ListDevices(*req, resp));
}

grpc::Status TensordService::ListOps(grpc::ServerContext*, const v1::ListOpsRequest* req,
                                     v1::ListOpsResponse* resp) {
  return ToGrpcStatus(core_.ListOps(*req, resp));
}

grpc::Status TensordService::PutTensor(grpc::ServerContext* ctx,
                                       grpc::ServerReader<v1::PutTensorRequest>* reader,
                                       v1::PutTensorResponse* resp) {
  auto next = [reader](v1::PutTensorRequest* msg) { return reader->Read(msg); };
  return ToGrpcStatus(core_.PutTensor(next, CancelledFn(ctx), resp));
}

grpc::Status TensordService::GetTensor(grpc::ServerContext*, const v1::GetTensorRequest* req,
                                       grpc::ServerWriter<v1::GetTensorResponse>* writer) {
  auto write = [writer](const v1::GetTensorResponse& msg) { return writer->Write(msg); };
  return ToGrpcStatus(core_.GetTensor(*req, write));
}

grpc::Status TensordService::Execute(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                                     v1::ExecuteResponse* resp) {
  return ToGrpcStatus(core_.Execute(*req, CancelledFn(ctx), resp));
}

grpc::Status TensordService::Release(grpc::ServerContext*, const v1::ReleaseRequest* req,
                                     v1::ReleaseResponse* resp) {
  return ToGrpcStatus(core_.Release(*req, resp));
}

grpc::Status TensordService::OpenAutodiffContext(grpc::ServerContext*,
                                                 const v1::OpenAutodiffContextRequest* req,
                                                 v1::OpenAutodiffContextResponse* resp) {
  return ToGrpcStatus(core_.OpenAutodiffContext(*req, resp));
}

grpc::Status TensordService::CloseAutodiffContext(grpc::ServerContext*,
                                                  const v1::CloseAutodiffContextRequest* req,
                                                  v1::CloseAutodiffContextResponse* resp) {
  return ToGrpcStatus(core_.CloseAutodiffContext(*req, resp));
}

grpc::Status TensordService::Backward(grpc::ServerContext* ctx, const v1::BackwardRequest* req,
                                      v1::BackwardResponse* resp) {
  return ToGrpcStatus(core_.Backward(*req, CancelledFn(ctx), resp));
}

}  // namespace tensord
