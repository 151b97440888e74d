#include "server/service/convert.h"

#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dtype_table.h"
#include "server/core/status.h"

namespace tensord {

// A wire dtype this build lacks would be refused as unknown: the table must list every one.
static_assert(v1::DType_MAX == dtype_table::kCount, "common/dtype_table.h lacks a v1::DType");

absl::StatusOr<DType> DTypeFromProto(int value, const std::string& field) {
  const int index = dtype_table::IndexOfWireNumber(value);
  if (index < 0) {
    std::vector<std::string> known;
    for (int i = 0; i < dtype_table::kCount; ++i) {
      known.push_back(v1::DType_Name(static_cast<v1::DType>(dtype_table::WireNumber(i))));
    }
    return Error(Reason::kInvalidRequest,
                 absl::StrCat("request: ", field, " has dtype value ", value,
                              value == 0 ? " (DTYPE_UNSPECIFIED)" : " (unknown)", "; use one of ",
                              absl::StrJoin(known, ", ")),
                 {{"field", field}, {"value", absl::StrCat(value)}});
  }
  return static_cast<DType>(index);
}

v1::DType DTypeToProto(DType dtype) {
  return static_cast<v1::DType>(dtype_table::WireNumber(static_cast<int>(dtype)));
}

void FillSharedMemoryInfo(const SharedMemorySpec& spec, v1::SharedMemoryInfo* info) {
  info->set_name(spec.name);
  info->set_key(spec.key);
  info->set_offset(spec.offset);
  info->set_byte_size(spec.byte_size);
}

void FillTensorInfo(uint64_t handle, const Tensor& t, v1::TensorInfo* info) {
  info->set_handle(handle);
  info->set_dtype(DTypeToProto(t.dtype()));
  for (int64_t d : t.shape()) info->add_shape(d);
  info->set_device(t.device());
  const auto& meta = t.autograd();
  info->set_requires_grad(meta != nullptr);
  info->set_context_id(meta ? meta->context_id : 0);
  info->set_is_leaf(meta != nullptr && meta->grad_fn == nullptr);
  info->set_nbytes(t.nbytes());
}

void FillTensorData(const Tensor& t, std::string bytes, v1::TensorData* data) {
  data->set_dtype(DTypeToProto(t.dtype()));
  for (int64_t d : t.shape()) data->add_shape(d);
  data->set_data(std::move(bytes));
}

absl::StatusOr<AttrValue> AttrFromProto(const std::string& op, const std::string& name,
                                        const v1::AttrValue& value) {
  switch (value.value_case()) {
    case v1::AttrValue::kB:
      return AttrValue(value.b());
    case v1::AttrValue::kI:
      return AttrValue(static_cast<int64_t>(value.i()));
    case v1::AttrValue::kF:
      return AttrValue(value.f());
    case v1::AttrValue::kS:
      return AttrValue(value.s());
    case v1::AttrValue::kInts:
      return AttrValue(
          std::vector<int64_t>(value.ints().values().begin(), value.ints().values().end()));
    case v1::AttrValue::kFloats:
      return AttrValue(
          std::vector<double>(value.floats().values().begin(), value.floats().values().end()));
    case v1::AttrValue::VALUE_NOT_SET:
      break;
  }
  return Error(Reason::kBadAttribute,
               absl::StrCat(op, ": attribute '", name,
                            "' has no value; omit it to take its "
                            "default"),
               {{"op", op}, {"attribute", name}});
}

void AttrToProto(const AttrValue& value, v1::AttrValue* out) {
  if (const auto* b = std::get_if<bool>(&value)) {
    out->set_b(*b);
  } else if (const auto* i = std::get_if<int64_t>(&value)) {
    out->set_i(*i);
  } else if (const auto* f = std::get_if<double>(&value)) {
    out->set_f(*f);
  } else if (const auto* s = std::get_if<std::string>(&value)) {
    out->set_s(*s);
  } else if (const auto* ints = std::get_if<std::vector<int64_t>>(&value)) {
    for (int64_t v : *ints) out->mutable_ints()->add_values(v);
    out->mutable_ints();  // an empty list is a value, not "unset"
  } else if (const auto* floats = std::get_if<std::vector<double>>(&value)) {
    for (double v : *floats) out->mutable_floats()->add_values(v);
    out->mutable_floats();
  }
}

namespace {

v1::Marking MarkingToProto(Marking m) {
  switch (m) {
    case Marking::kDifferentiable:
      return v1::MARKING_DIFFERENTIABLE;
    case Marking::kZeroGrad:
      return v1::MARKING_ZERO_GRAD;
    case Marking::kNonDifferentiable:
      return v1::MARKING_NON_DIFFERENTIABLE;
    case Marking::kUnmarked:
      return v1::MARKING_UNMARKED;
  }
  return v1::MARKING_UNSPECIFIED;
}

// `field` names the operand in errors, e.g. "calls[2].inputs[0]" (made only for one).
absl::StatusOr<OperandSpec> OperandFromProto(const v1::Operand& in,
                                             absl::FunctionRef<std::string()> field) {
  OperandSpec out;
  switch (in.source_case()) {
    case v1::Operand::kHandle:
      out.source = OperandSpec::Handle{in.handle()};
      break;
    case v1::Operand::kCallOutput:
      out.source = OperandSpec::CallOutput{in.call_output().call(), in.call_output().output()};
      break;
    case v1::Operand::kLiteral: {
      OperandSpec::Literal lit;
      ASSIGN_OR_RETURN(
          lit.dtype, DTypeFromProto(in.literal().dtype(), absl::StrCat(field(), ".literal.dtype")));
      lit.shape.assign(in.literal().shape().begin(), in.literal().shape().end());
      lit.data = in.literal().data();
      out.source = std::move(lit);
      break;
    }
    case v1::Operand::kScalar:
      switch (in.scalar().value_case()) {
        case v1::Scalar::kF:
          out.source = OperandSpec::Scalar(in.scalar().f());
          break;
        case v1::Scalar::kI:
          out.source = OperandSpec::Scalar(static_cast<int64_t>(in.scalar().i()));
          break;
        case v1::Scalar::kB:
          out.source = OperandSpec::Scalar(in.scalar().b());
          break;
        case v1::Scalar::VALUE_NOT_SET:
          break;  // stays monostate: BAD_OPERAND when the call runs
      }
      break;
    case v1::Operand::kParameter:
      out.source = OperandSpec::Parameter{in.parameter()};
      break;
    case v1::Operand::kGradient:
      out.source = OperandSpec::Gradient{in.gradient()};
      break;
    case v1::Operand::SOURCE_NOT_SET:
      break;
  }
  return out;
}

// `field` is the repeated field holding the call ("calls", "updates"); `k` its index there
// and `index` its number in the batch or program (the errors' call_index).
absl::StatusOr<CallSpec> CallFromProto(const v1::OpCall& in, const char* field, int k,
                                       size_t index) {
  CallSpec call;
  call.op = in.op();
  call.requires_grad = in.requires_grad();
  call.fetch = in.fetch();
  call.keep = in.keep();
  call.discard = in.discard();
  call.inputs.reserve(in.inputs_size());
  for (int i = 0; i < in.inputs_size(); ++i) {
    auto operand = OperandFromProto(
        in.inputs(i), [&] { return absl::StrCat(field, "[", k, "].inputs[", i, "]"); });
    if (!operand.ok()) {
      return WithMetadata(operand.status(),
                          {{"call_index", absl::StrCat(index)}, {"input_index", absl::StrCat(i)}});
    }
    call.inputs.push_back(*std::move(operand));
  }
  for (const auto& [name, value] : in.attrs()) {
    auto attr = AttrFromProto(in.op(), name, value);
    if (!attr.ok()) return WithMetadata(attr.status(), {{"call_index", absl::StrCat(index)}});
    call.attrs.emplace(name, *std::move(attr));
  }
  return call;
}

}  // namespace

void FillOpInfo(const OpDef& def, const std::vector<std::string>& backends, v1::OpInfo* info) {
  info->set_name(def.name);
  info->set_category(def.category);
  info->set_min_inputs(def.min_inputs);
  info->set_max_inputs(def.max_inputs);
  for (const std::string& n : def.input_names) info->add_input_names(n);
  for (const AttrSpec& spec : def.attrs) {
    v1::AttrInfo* a = info->add_attrs();
    a->set_name(spec.name);
    a->set_type(AttrTypeName(spec.type));
    a->set_required(spec.required);
    if (!std::holds_alternative<std::monostate>(spec.default_value)) {
      AttrToProto(spec.default_value, a->mutable_default_value());
    }
    for (const std::string& c : spec.choices) a->add_choices(c);
    for (const std::string& alias : spec.aliases) a->add_aliases(alias);
  }
  // bf16/f16 wherever f32 is: the dispatcher accepts them there (computed in f32).
  const DTypeSet dtypes = def.widen_storage_dtypes ? WithStorageDTypes(def.dtypes) : def.dtypes;
  for (DType d : dtypes.ToVector()) info->add_dtypes(DTypeToProto(d));
  for (const std::string& b : backends) info->add_backends(b);
  info->set_marking(MarkingToProto(def.marking));
  info->set_origin(def.origin);
  info->set_doc(def.doc);
}

absl::StatusOr<BatchSpec> BatchFromProto(const v1::ExecuteRequest& request) {
  BatchSpec batch;
  batch.no_grad = request.no_grad();
  batch.context_id = request.context_id();
  batch.calls.reserve(request.calls_size());
  for (int k = 0; k < request.calls_size(); ++k) {
    ASSIGN_OR_RETURN(CallSpec call, CallFromProto(request.calls(k), "calls", k, k));
    batch.calls.push_back(std::move(call));
  }
  return batch;
}

absl::StatusOr<ProgramSpec> ProgramSpecFromProto(
    std::shared_ptr<const v1::CompileProgramRequest> request) {
  ProgramSpec spec;
  const v1::CompileProgramRequest& req = *request;
  for (int p = 0; p < req.parameters_size(); ++p) {
    ParameterSpec param;
    param.name = req.parameters(p).name();
    if (param.name.size() > kMaxParameterNameBytes) {
      return Error(Reason::kInvalidRequest,
                   absl::StrCat("program: the name of parameter ", p, " '", param.name,
                                "' is longer than ", kMaxParameterNameBytes, " bytes"),
                   {{"field", "parameters.name"},
                    {"parameter_index", absl::StrCat(p)},
                    {"parameter", param.name}});
    }
    auto example = OperandFromProto(req.parameters(p).example(),
                                    [&] { return absl::StrCat("parameters[", p, "].example"); });
    if (!example.ok()) {
      return WithMetadata(example.status(), {{"parameter_index", absl::StrCat(p)}});
    }
    param.example = *std::move(example);
    spec.parameters.push_back(std::move(param));
  }
  for (int k = 0; k < req.calls_size(); ++k) {
    ASSIGN_OR_RETURN(CallSpec call, CallFromProto(req.calls(k), "calls", k, k));
    spec.calls.push_back(std::move(call));
  }
  for (int j = 0; j < req.updates_size(); ++j) {
    ASSIGN_OR_RETURN(CallSpec call,
                     CallFromProto(req.updates(j), "updates", j, req.calls_size() + j));
    spec.updates.push_back(std::move(call));
  }
  spec.context_id = req.context_id();
  spec.no_grad = req.no_grad();
  spec.backward = req.has_backward();
  for (const v1::CallOutput& root : req.backward().roots()) {
    spec.roots.push_back({root.call(), root.output()});
  }
  spec.leaves.assign(req.backward().leaves().begin(), req.backward().leaves().end());
  spec.fetch_gradients = req.backward().fetch_gradients();
  spec.reduction = GradientReductionFromProto(req.backward().reduce());
  spec.owner = std::move(request);
  return spec;
}

GradientReductionSpec GradientReductionFromProto(const v1::GradientReduction& reduce) {
  GradientReductionSpec spec;
  spec.op = reduce.op().empty() ? "mean" : reduce.op();
  for (const v1::GradientBucket& bucket : reduce.buckets()) {
    spec.buckets.emplace_back(bucket.leaves().begin(), bucket.leaves().end());
  }
  return spec;
}

absl::StatusOr<std::vector<OperandSpec>> ProgramInputsFromProto(const v1::RunProgramRequest& req) {
  std::vector<OperandSpec> inputs;
  for (int p = 0; p < req.inputs_size(); ++p) {
    auto operand = OperandFromProto(req.inputs(p), [&] { return absl::StrCat("inputs[", p, "]"); });
    if (!operand.ok()) {
      return WithMetadata(operand.status(), {{"parameter_index", absl::StrCat(p)}});
    }
    inputs.push_back(*std::move(operand));
  }
  return inputs;
}

absl::StatusOr<PutSpec> PutSpecFromProto(const v1::PutHeader& header) {
  PutSpec spec;
  ASSIGN_OR_RETURN(spec.dtype, DTypeFromProto(header.dtype(), "header.dtype"));
  spec.shape.assign(header.shape().begin(), header.shape().end());
  spec.device = header.device();
  spec.requires_grad = header.requires_grad();
  spec.context_id = header.context_id();
  return spec;
}

absl::StatusOr<Checkpointing> CheckpointingFromProto(int value) {
  switch (value) {
    case v1::CHECKPOINTING_UNSPECIFIED:
    case v1::CHECKPOINTING_NONE:
      return Checkpointing::kNone;
    case v1::CHECKPOINTING_BALANCED:
      return Checkpointing::kBalanced;
    default:
      return Error(Reason::kInvalidRequest,
                   absl::StrCat("autodiff: unknown checkpointing value ", value,
                                "; use CHECKPOINTING_NONE or CHECKPOINTING_BALANCED"),
                   {{"field", "checkpointing"}, {"value", absl::StrCat(value)}});
  }
}

const char* CheckpointingName(Checkpointing c) {
  return c == Checkpointing::kBalanced ? "balanced" : "none";
}

void FillGroupInfo(const distributed::ProcessGroup& group, v1::GroupInfo* info) {
  info->set_name(group.name());
  info->set_rank(group.rank());
  info->set_world_size(group.size());
  info->set_backend(group.backend());
}

}  // namespace tensord
