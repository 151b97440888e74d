// CompileProgram, RunProgram and ReleaseProgram.
#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/service/convert.h"
#include "server/service/program.h"
#include "server/service/service_core.h"

namespace tensord {
namespace {

void FillOutcome(std::vector<CallOutcome>& calls,
                 google::protobuf::RepeatedPtrField<v1::CallResult>* results) {
  results->Reserve(static_cast<int>(calls.size()));
  for (CallOutcome& outcome : calls) {
    v1::CallResult* result = results->Add();
    for (size_t i = 0; i < outcome.outputs.size(); ++i) {
      const StoredTensor& out = outcome.outputs[i];
      FillTensorInfo(out.handle, out.tensor, result->add_outputs());
      if (i < outcome.fetched.size()) {
        FillTensorData(out.tensor, std::move(outcome.fetched[i]), result->add_values());
      }
    }
  }
}

// The bytes of the literals a program names, its parameters' examples included (they live in
// its stored request).
int64_t LiteralBytes(const ProgramSpec& spec) {
  int64_t bytes = 0;
  auto add = [&bytes](const OperandSpec& o) {
    if (const auto* l = std::get_if<OperandSpec::Literal>(&o.source)) {
      bytes += static_cast<int64_t>(l->data.size());
    }
  };
  for (const ParameterSpec& p : spec.parameters) add(p.example);
  for (const std::vector<CallSpec>* calls : {&spec.calls, &spec.updates}) {
    for (const CallSpec& c : *calls) {
      for (const OperandSpec& o : c.inputs) add(o);
    }
  }
  return bytes;
}

}  // namespace

ExecuteLimits ServiceCore::BatchLimits() const {
  ExecuteLimits limits;
  // Output infos and framing share the message with the fetched bytes.
  limits.max_fetch_bytes = config_.max_message_bytes / 8 * 7;
  limits.tensor_limits = config_.limits;
  return limits;
}

absl::Status ServiceCore::CompileProgram(const v1::CompileProgramRequest& req,
                                         const Cancelled& cancelled,
                                         v1::CompileProgramResponse* resp) {
  const int64_t size = static_cast<int64_t>(req.ByteSizeLong());
  if (size > config_.max_message_bytes) {
    return LimitError("program", "max_message_bytes", size, config_.max_message_bytes,
                      "request bytes");
  }
  if (const int64_t n = req.calls_size() + req.updates_size();
      n > config_.limits.max_calls_per_program) {
    return LimitError("program", "max_calls_per_program", n, config_.limits.max_calls_per_program,
                      "calls (forward and updates)");
  }
  // The program keeps the request: its literals point into it.
  auto owned = std::make_shared<const v1::CompileProgramRequest>(req);
  ASSIGN_OR_RETURN(ProgramSpec spec, ProgramSpecFromProto(owned));
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  absl::MutexLock lock(&session->mu());
  RETURN_IF_ERROR(session->CheckLive());
  ASSIGN_OR_RETURN(std::shared_ptr<Program> program,
                   tensord::CompileProgram(*session, dispatcher_, std::move(spec), cancelled,
                                           BatchLimits(), config_.fusion));
  // Its serialized size: literals and attributes are most of it. (SpaceUsedLong walks the
  // message by reflection, which crashed on the map fields in the TSan build of protobuf 3.21.)
  // A fused program also keeps its calls as written, sharing the request's literals.
  const int64_t as_written = program->unfused != nullptr
                                 ? std::max<int64_t>(0, size - LiteralBytes(*program->unfused))
                                 : 0;
  RETURN_IF_ERROR(ChargeProgram(*program, session->account(), size + as_written));
  // A run's peak, held of the quota from now on (program_memory_plan.h).
  program->peak_hold.Set(session->account(), program->peak_bytes);
  if (!program->peak_hold.Hold()) {
    return QuotaRefusal(*session->account(), program->peak_bytes,
                        absl::StrCat("a run holds up to ", program->peak_bytes,
                                     " bytes at its peak, which the quota must keep for it "
                                     "beside the program"));
  }
  const Program& compiled = *program;
  resp->set_program_id(session->AddProgram(std::move(program)));
  const size_t n_forward = compiled.spec.calls.size();
  const auto call_at = [&](size_t k) -> const CallSpec& {
    return k < n_forward ? compiled.spec.calls[k] : compiled.spec.updates[k - n_forward];
  };
  resp->set_fused_calls(compiled.fused_calls);
  resp->set_peak_bytes(static_cast<uint64_t>(compiled.peak_bytes));
  for (size_t k = 0; k < compiled.outputs.size(); ++k) {
    v1::ProgramCallInfo* info = resp->add_calls();
    const CallSpec& call = call_at(k);
    if (!call.requested_op.empty()) {
      info->set_op(call.requested_op);
      info->set_fused_op(call.op);
    } else {
      info->set_op(call.op);
      if (call.folded_into >= 0) info->set_fused_op(call_at(call.folded_into).op);
    }
    for (const TensorMeta& meta : compiled.outputs[k]) {
      v1::TensorInfo* out = info->add_outputs();
      out->set_dtype(DTypeToProto(meta.dtype));
      for (int64_t d : meta.shape) out->add_shape(d);
      out->set_device(meta.device);
    }
  }
  return absl::OkStatus();
}

absl::Status ServiceCore::RunProgram(const v1::RunProgramRequest& req, const Cancelled& cancelled,
                                     v1::RunProgramResponse* resp) {
  if (const int64_t size = static_cast<int64_t>(req.ByteSizeLong());
      size > config_.max_message_bytes) {
    return LimitError("program", "max_message_bytes", size, config_.max_message_bytes,
                      "request bytes");
  }
  ASSIGN_OR_RETURN(std::vector<OperandSpec> inputs, ProgramInputsFromProto(req));
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  absl::MutexLock lock(&session->mu());
  RETURN_IF_ERROR(session->CheckLive());
  ASSIGN_OR_RETURN(Program * program, session->FindProgram(req.program_id()));
  const std::string& device = session->device();
  OpTimings timings;
  auto observe = [&timings](const CallSpec& call, absl::Duration took) {
    timings.Add(call.op, took);
  };
  auto outcome = tensord::RunProgram(*session, dispatcher_, *program, inputs, cancelled,
                                     BatchLimits(), observe);
  metrics_.RecordOps(timings, device);
  if (!outcome.ok()) {
    return WithMetadata(outcome.status(), {{"program_id", absl::StrCat(req.program_id())}});
  }
  if (program->spec.backward) {
    metrics_.RecordBackward(outcome->backward_planned ? "plan" : "walk");
  }
  FillOutcome(outcome->calls, resp->mutable_results());
  for (size_t l = 0; l < outcome->gradients.size(); ++l) {
    FillTensorData(outcome->gradients[l], std::move(outcome->gradient_bytes[l]),
                   resp->add_gradients());
  }
  return absl::OkStatus();
}

absl::Status ServiceCore::ReleaseProgram(const v1::ReleaseProgramRequest& req,
                                         v1::ReleaseProgramResponse*) {
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  absl::MutexLock lock(&session->mu());
  RETURN_IF_ERROR(session->CheckLive());
  return session->ReleaseProgram(req.program_id());
}

}  // namespace tensord
