// Session lifecycle and discovery RPCs.
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/service/convert.h"
#include "server/service/program.h"
#include "server/service/server_log.h"
#include "server/service/service_core.h"

namespace tensord {

ServiceCore::ServiceCore(ServiceConfig config)
    : config_(std::move(config)),
      dispatcher_(config_.registry ? *config_.registry : OpRegistry::Builtin(),
                  std::move(MakeBackends(config_.backends)).value()),
      sessions_(config_.reap_interval, config_.max_sessions_per_tenant),
      metrics_(sessions_, static_cast<int64_t>(dispatcher_.registry().All().size()) -
                              static_cast<int64_t>(OpRegistry::Builtin().All().size())) {
  for (const OpDef* def : dispatcher_.registry().All()) {
    if (def->internal) continue;
    FillOpInfo(*def, dispatcher_.BackendsFor(*def), ops_.add_ops());
  }
  sessions_.set_on_expired([this](const Session& s) {
    metrics_.RecordSessionExpired(1);
    DefaultLog().Write(LogLevel::kInfo, "session_expired",
                       {{"session", s.id()},
                        {"tenant", s.tenant()},
                        {"idle_ttl_s", absl::ToInt64Seconds(s.ttl())},
                        {"tensors", s.tensor_count()},
                        {"bytes", s.account()->used()}});
  });
}

absl::Status ServiceCore::CreateSession(const v1::CreateSessionRequest& req,
                                        const std::string& tenant,
                                        v1::CreateSessionResponse* resp) {
  SessionConfig config;
  config.tenant = tenant;
  config.device = req.device().empty() ? kHostDevice : req.device();
  RETURN_IF_ERROR(dispatcher_.BackendFor(config.device).status());
  const uint64_t ttl = req.ttl_seconds() ? req.ttl_seconds() : config_.default_ttl_seconds;
  // A TTL beyond ten years is a mistake, and it would overflow absl::Duration arithmetic.
  constexpr uint64_t kMaxTtlSeconds = uint64_t{10} * 365 * 24 * 3600;
  if (ttl > kMaxTtlSeconds) {
    return Error(
        Reason::kLimitExceeded,
        absl::StrCat("session: ttl_seconds ", ttl, " is above the limit of ", kMaxTtlSeconds),
        {{"limit", "ttl_seconds"}, {"max", absl::StrCat(kMaxTtlSeconds)}});
  }
  config.ttl = absl::Seconds(static_cast<int64_t>(ttl));
  const uint64_t quota =
      req.memory_quota_bytes() ? req.memory_quota_bytes() : config_.default_quota_bytes;
  // Refused rather than clamped: a client that asked for more would otherwise find out only
  // when an allocation fails much later.
  if (quota > static_cast<uint64_t>(config_.max_quota_bytes)) {
    return Error(
        Reason::kLimitExceeded,
        absl::StrCat("session: memory_quota_bytes ", quota, " is above this server's maximum of ",
                     config_.max_quota_bytes, " bytes"),
        {{"limit", "memory_quota_bytes"},
         {"requested", absl::StrCat(quota)},
         {"max", absl::StrCat(config_.max_quota_bytes)}});
  }
  config.quota_bytes = static_cast<int64_t>(quota);
  config.autodiff_enabled = !req.disable_autodiff();
  ASSIGN_OR_RETURN(config.matmul_precision, ParseMatmulPrecision(req.float32_matmul_precision(),
                                                                 "float32_matmul_precision"));
  std::shared_ptr<Session> session;
  ASSIGN_OR_RETURN(session, sessions_.Create(config));
  // No one tensor of the session may exceed max_tensor_bytes, however it is made.
  session->account()->set_max_charge_bytes(config_.limits.max_tensor_bytes);
  metrics_.RecordSessionCreated();
  resp->set_session_id(session->id());
  resp->set_ttl_seconds(ttl);
  resp->set_memory_quota_bytes(quota);
  resp->set_device(config.device);
  resp->set_autodiff_enabled(config.autodiff_enabled);
  resp->set_float32_matmul_precision(MatmulPrecisionName(config.matmul_precision));
  return absl::OkStatus();
}

absl::Status ServiceCore::KeepAlive(const v1::KeepAliveRequest& req, v1::KeepAliveResponse* resp) {
  absl::Duration ttl;
  ASSIGN_OR_RETURN(ttl, sessions_.KeepAlive(req.session_id()));
  resp->set_ttl_seconds(absl::ToInt64Seconds(ttl));
  return absl::OkStatus();
}

absl::Status ServiceCore::CloseSession(const v1::CloseSessionRequest& req,
                                       v1::CloseSessionResponse*) {
  return sessions_.Close(req.session_id());
}

absl::Status ServiceCore::GetSessionInfo(const v1::GetSessionInfoRequest& req,
                                         v1::GetSessionInfoResponse* resp) {
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  absl::MutexLock lock(&session->mu());
  RETURN_IF_ERROR(session->CheckLive());
  resp->set_session_id(session->id());
  resp->set_device(session->device());
  resp->set_memory_used_bytes(session->account()->used());
  resp->set_memory_quota_bytes(session->account()->quota());
  resp->set_ttl_seconds(absl::ToInt64Seconds(session->ttl()));
  resp->set_autodiff_enabled(session->autodiff_enabled());
  resp->set_float32_matmul_precision(MatmulPrecisionName(session->matmul_precision()));
  for (const auto& [handle, t] : session->tensors()) {
    FillTensorInfo(handle, t, resp->add_tensors());
  }
  for (const AutodiffContext* ctx : session->contexts()) {
    v1::ContextInfo* info = resp->add_contexts();
    info->set_context_id(ctx->id());
    info->set_checkpointing(CheckpointingName(ctx->checkpointing()));
    info->set_state(ContextStateName(ctx->state()));
    info->set_tape_nodes(ctx->live_nodes());
    info->set_saved_bytes(ctx->SavedBytes());
  }
  for (const auto& [id, program] : session->programs()) {
    v1::ProgramInfo* info = resp->add_programs();
    info->set_program_id(id);
    info->set_parameters(program->parameters.size());
    info->set_calls(program->spec.calls.size());
    info->set_updates(program->spec.updates.size());
    info->set_context_id(program->spec.context_id);
    info->set_backward(program->spec.backward);
    info->set_runs(program->runs);
    info->set_peak_bytes(static_cast<uint64_t>(program->peak_bytes));
  }
  for (const auto& [name, region] : session->shared_memory()) {
    FillSharedMemoryInfo(region->spec(), resp->add_shared_memory());
  }
  if (std::shared_ptr<distributed::ProcessGroup> group = session->group()) {
    FillGroupInfo(*group, resp->mutable_group());
  }
  return absl::OkStatus();
}

absl::Status ServiceCore::ListDevices(const v1::ListDevicesRequest&,
                                      v1::ListDevicesResponse* resp) {
  for (const DeviceInfo& d : dispatcher_.Devices()) {
    v1::DeviceInfo* info = resp->add_devices();
    info->set_name(d.name);
    info->set_kind(d.kind);
    info->set_description(d.description);
    info->set_memory_bytes(d.memory_bytes);
    info->set_vendor(d.vendor);
  }
  return absl::OkStatus();
}

absl::Status ServiceCore::ListOps(const v1::ListOpsRequest&, v1::ListOpsResponse* resp) {
  *resp = ops_;
  return absl::OkStatus();
}

}  // namespace tensord
