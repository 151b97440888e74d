// The RPCs of tensord.v1.Tensord as plain functions: protobuf request in, protobuf response
// out, absl::Status back. The gRPC handlers (tensord_service.cc) only adapt streams and
// convert the status, so everything here is testable without a channel.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/backends/registered_backends.h"
#include "server/dispatch/dispatcher.h"
#include "server/service/execute.h"
#include "server/service/limits.h"
#include "server/service/service_metrics.h"
#include "server/service/session.h"
#include "server/service/shared_memory.h"
#include "tensord/v1/service.pb.h"

namespace tensord {

struct ServiceConfig {
  int64_t default_ttl_seconds = 600;
  int64_t default_quota_bytes = int64_t{4} << 30;
  int64_t max_quota_bytes = int64_t{64} << 30;
  absl::Duration reap_interval = absl::Seconds(1);
  // The transport's message limit: inline fetches and download chunks stay below it.
  int64_t max_message_bytes = 64 << 20;
  // What one request may make the server create (tensor size, rank, batch length, contexts).
  ServiceLimits limits;
  // Sessions one tenant may hold at once; 0 = no limit.
  int64_t max_sessions_per_tenant = 64;
  // The op table served; null serves OpRegistry::Builtin() (a server with plugins passes the
  // built-in table plus the plugins' ops).
  std::shared_ptr<const OpRegistry> registry;
  // The backends and devices served. ServiceCore assumes they were checked (MakeBackends):
  // the server refuses to start with a device the machine lacks.
  BackendOptions backends;
  // Same-host shared memory regions (off by default).
  SharedMemoryOptions shared_memory;
  // Process groups: the peers' timeout and this server's address for them.
  distributed::CollectiveConfig collectives;
  // Programs (program_fusion.h) and Execute batches (batch_fusion.h) fuse products with the
  // pointwise ops after them.
  bool fusion = true;
};

class ServiceCore {
 public:
  using Cancelled = std::function<bool()>;

  explicit ServiceCore(ServiceConfig config);
  ServiceCore(const ServiceCore&) = delete;
  ServiceCore& operator=(const ServiceCore&) = delete;

  // The session belongs to `tenant` (see SessionManager::CheckTenant).
  absl::Status CreateSession(const v1::CreateSessionRequest& req, const std::string& tenant,
                             v1::CreateSessionResponse* resp);
  absl::Status KeepAlive(const v1::KeepAliveRequest& req, v1::KeepAliveResponse* resp);
  absl::Status CloseSession(const v1::CloseSessionRequest& req, v1::CloseSessionResponse* resp);
  absl::Status GetSessionInfo(const v1::GetSessionInfoRequest& req,
                              v1::GetSessionInfoResponse* resp);
  absl::Status ListDevices(const v1::ListDevicesRequest& req, v1::ListDevicesResponse* resp);
  absl::Status ListOps(const v1::ListOpsRequest& req, v1::ListOpsResponse* resp);

  // `next` yields the stream's messages in order and returns false at its end (or when the
  // client went away, which `cancelled` then reports).
  absl::Status PutTensor(const std::function<bool(v1::PutTensorRequest*)>& next,
                         const Cancelled& cancelled, v1::PutTensorResponse* resp);
  // `write` sends one message and returns false when the client is gone.
  absl::Status GetTensor(const v1::GetTensorRequest& req,
                         const std::function<bool(const v1::GetTensorResponse&)>& write);
  absl::Status Execute(const v1::ExecuteRequest& req, const Cancelled& cancelled,
                       v1::ExecuteResponse* resp);
  absl::Status Release(const v1::ReleaseRequest& req, v1::ReleaseResponse* resp);
  absl::Status OpenAutodiffContext(const v1::OpenAutodiffContextRequest& req,
                                   v1::OpenAutodiffContextResponse* resp);
  absl::Status CloseAutodiffContext(const v1::CloseAutodiffContextRequest& req,
                                    v1::CloseAutodiffContextResponse* resp);
  absl::Status Backward(const v1::BackwardRequest& req, const Cancelled& cancelled,
                        v1::BackwardResponse* resp);
  absl::Status CompileProgram(const v1::CompileProgramRequest& req, const Cancelled& cancelled,
                              v1::CompileProgramResponse* resp);
  absl::Status RunProgram(const v1::RunProgramRequest& req, const Cancelled& cancelled,
                          v1::RunProgramResponse* resp);
  absl::Status ReleaseProgram(const v1::ReleaseProgramRequest& req,
                              v1::ReleaseProgramResponse* resp);
  absl::Status RegisterSharedMemory(const v1::RegisterSharedMemoryRequest& req,
                                    v1::RegisterSharedMemoryResponse* resp);
  absl::Status UnregisterSharedMemory(const v1::UnregisterSharedMemoryRequest& req,
                                      v1::UnregisterSharedMemoryResponse* resp);
  absl::Status JoinGroup(const v1::JoinGroupRequest& req, v1::JoinGroupResponse* resp);
  absl::Status LeaveGroup(const v1::LeaveGroupRequest& req, v1::LeaveGroupResponse* resp);

  const Dispatcher& dispatcher() const { return dispatcher_; }
  SessionManager& sessions() { return sessions_; }
  ServiceMetrics& metrics() { return metrics_; }
  int op_count() const { return ops_.ops_size(); }

 private:
  // What a batch or program run may fetch inline and create.
  ExecuteLimits BatchLimits() const;
  // The puts and gets that name a shared memory region instead of streaming (rpc_tensors.cc).
  absl::Status PutFromSharedMemory(const v1::PutHeader& header,
                                   const std::function<bool(v1::PutTensorRequest*)>& next,
                                   v1::PutTensorResponse* resp);
  absl::Status GetToSharedMemory(const v1::GetTensorRequest& req,
                                 const std::function<bool(const v1::GetTensorResponse&)>& write);

  const ServiceConfig config_;
  Dispatcher dispatcher_;
  SessionManager sessions_;
  ServiceMetrics metrics_;
  v1::ListOpsResponse ops_;  // the catalog never changes after start-up
};

}  // namespace tensord
