// Protobuf messages of tensord.v1 ↔ core types. Parsing errors are INVALID_REQUEST (or the
// more specific reason) and name the offending field.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/ops/op_def.h"
#include "server/service/execute.h"
#include "server/service/program.h"
#include "server/service/shared_memory.h"
#include "server/service/transfer.h"
#include "tensord/v1/service.pb.h"

namespace tensord {

// INVALID_REQUEST for DTYPE_UNSPECIFIED or an unknown enum value; `field` names it.
absl::StatusOr<DType> DTypeFromProto(int value, const std::string& field);
v1::DType DTypeToProto(DType dtype);

void FillTensorInfo(uint64_t handle, const Tensor& t, v1::TensorInfo* info);
void FillSharedMemoryInfo(const SharedMemorySpec& spec, v1::SharedMemoryInfo* info);
void FillGroupInfo(const distributed::ProcessGroup& group, v1::GroupInfo* info);
void FillTensorData(const Tensor& t, std::string bytes, v1::TensorData* data);

// An unset AttrValue is BAD_ATTRIBUTE naming `name`.
absl::StatusOr<AttrValue> AttrFromProto(const std::string& op, const std::string& name,
                                        const v1::AttrValue& value);
// std::monostate leaves `out` unset.
void AttrToProto(const AttrValue& value, v1::AttrValue* out);

void FillOpInfo(const OpDef& def, const std::vector<std::string>& backends, v1::OpInfo* info);

// The request as plain structs; literal bytes point into `request`, which must outlive it.
absl::StatusOr<BatchSpec> BatchFromProto(const v1::ExecuteRequest& request);
absl::StatusOr<PutSpec> PutSpecFromProto(const v1::PutHeader& header);
GradientReductionSpec GradientReductionFromProto(const v1::GradientReduction& reduce);
// The program keeps `request` alive: its literals point into it.
absl::StatusOr<ProgramSpec> ProgramSpecFromProto(
    std::shared_ptr<const v1::CompileProgramRequest> request);
// Literal bytes point into `request`, which must outlive the run.
absl::StatusOr<std::vector<OperandSpec>> ProgramInputsFromProto(
    const v1::RunProgramRequest& request);

absl::StatusOr<Checkpointing> CheckpointingFromProto(int value);
const char* CheckpointingName(Checkpointing c);  // "none", "balanced"

}  // namespace tensord
