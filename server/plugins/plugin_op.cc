#include "server/plugins/plugin_op.h"

#include <cstring>
#include <optional>
#include <set>
#include <variant>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"

namespace tensord::plugins {
namespace {

// The ABI's dtype numbers are the server's, so tensors cross without a lookup table. Server
// dtypes beyond them are not passed to plugins (see CheckDTypes).
static_assert(static_cast<int>(DType::kF32) == TENSORD_DTYPE_F32);
static_assert(static_cast<int>(DType::kF64) == TENSORD_DTYPE_F64);
static_assert(static_cast<int>(DType::kI32) == TENSORD_DTYPE_I32);
static_assert(static_cast<int>(DType::kI64) == TENSORD_DTYPE_I64);
static_assert(static_cast<int>(DType::kBool) == TENSORD_DTYPE_BOOL);
constexpr int kAbiDTypes = TENSORD_DTYPE_BOOL + 1;
constexpr uint32_t kAllDTypeBits = (1u << kAbiDTypes) - 1;
constexpr int kMaxOutputs = 64;
constexpr size_t kMaxNameLength = 128;

bool ValidName(const char* s) {
  if (s == nullptr || !(*s >= 'a' && *s <= 'z') || std::strlen(s) > kMaxNameLength) return false;
  for (; *s; ++s) {
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')) return false;
  }
  return true;
}

absl::Status Malformed(const std::string& op, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("op '", op, "': ", what));
}

absl::StatusOr<AttrSpec> ParseAttr(const std::string& op, const tensord_attr_spec& a, int index) {
  if (!ValidName(a.name)) {
    return Malformed(op, absl::StrCat("attribute ", index, " has no valid name ([a-z][a-z0-9_]*)"));
  }
  AttrSpec spec;
  spec.name = a.name;
  spec.required = a.required != 0;
  switch (a.type) {
    case TENSORD_ATTR_BOOL:
      spec.type = AttrType::kBool;
      spec.default_value = a.default_int != 0;
      break;
    case TENSORD_ATTR_INT:
      spec.type = AttrType::kInt;
      spec.default_value = a.default_int;
      break;
    case TENSORD_ATTR_FLOAT:
      spec.type = AttrType::kFloat;
      spec.default_value = a.default_float;
      break;
    case TENSORD_ATTR_STRING:
      spec.type = AttrType::kString;
      spec.default_value = std::string(a.default_string ? a.default_string : "");
      break;
    default:
      return Malformed(op, absl::StrCat("attribute '", spec.name, "' has unknown type ", a.type));
  }
  if (spec.required) spec.default_value = std::monostate();
  return spec;
}

int32_t AttrTypeCode(AttrType type) {
  switch (type) {
    case AttrType::kBool:
      return TENSORD_ATTR_BOOL;
    case AttrType::kInt:
      return TENSORD_ATTR_INT;
    case AttrType::kString:
      return TENSORD_ATTR_STRING;
    default:
      return TENSORD_ATTR_FLOAT;
  }
}

tensord_tensor ToC(DType dtype, const Shape& shape, const void* data) {
  return {static_cast<int32_t>(dtype), static_cast<int32_t>(shape.size()), shape.data(),
          const_cast<void*>(data)};
}

tensord_tensor ToC(const Tensor& t) { return ToC(t.dtype(), t.shape(), t.raw()); }

// The C view of one call: input descriptors and attribute values pointing into the caller's
// tensors and validated attributes, which outlive the frame.
class CallFrame {
 public:
  CallFrame(const PluginOp& op, const Attrs& attrs) : user_data_(op.user_data) {
    for (const AttrSpec& spec : op.attrs) {
      tensord_attr a{spec.name.c_str(), AttrTypeCode(spec.type), 0, 0.0, nullptr};
      auto it = attrs.map().find(spec.name);
      if (it != attrs.map().end()) {
        const AttrValue& v = it->second;
        if (const bool* b = std::get_if<bool>(&v)) a.i = *b;
        if (const int64_t* i = std::get_if<int64_t>(&v)) {
          a.i = *i;
          a.f = static_cast<double>(*i);
        }
        if (const double* f = std::get_if<double>(&v)) a.f = *f;
        if (const std::string* s = std::get_if<std::string>(&v)) a.s = s->c_str();
      }
      if (a.type == TENSORD_ATTR_STRING && a.s == nullptr) a.s = "";
      attrs_.push_back(a);
    }
  }
  void Add(tensord_tensor t) { inputs_.push_back(t); }
  const tensord_call* call() {
    call_ = {inputs_.data(), static_cast<int32_t>(inputs_.size()), attrs_.data(),
             static_cast<int32_t>(attrs_.size()), user_data_};
    return &call_;
  }

 private:
  void* user_data_;
  std::vector<tensord_tensor> inputs_;
  std::vector<tensord_attr> attrs_;
  tensord_call call_{};
};

Reason ReasonOfCode(int32_t code) {
  switch (code) {
    case TENSORD_ERR_BAD_ATTRIBUTE:
      return Reason::kBadAttribute;
    case TENSORD_ERR_SHAPE_MISMATCH:
      return Reason::kShapeMismatch;
    case TENSORD_ERR_DTYPE_MISMATCH:
      return Reason::kDtypeMismatch;
    case TENSORD_ERR_INDEX_OUT_OF_RANGE:
      return Reason::kIndexOutOfRange;
    case TENSORD_ERR_INVALID:
      return Reason::kInvalidRequest;
    default:
      return Reason::kInternal;
  }
}

// What a callback's non-zero return becomes: the plugin's code as a reason, its message
// prefixed with the op and the plugin, and both in the metadata.
absl::Status Failure(const PluginOp& op, absl::string_view callback, int32_t code,
                     tensord_error& error) {
  error.message[TENSORD_PLUGIN_MAX_MESSAGE - 1] = '\0';
  std::string message = error.message;
  if (message.empty()) {
    message = absl::StrCat("the ", callback, " failed with status code ", code, " and no message");
  } else if (code < TENSORD_ERR_BAD_ATTRIBUTE || code > TENSORD_ERR_INTERNAL) {
    absl::StrAppend(&message, " (", callback, " status code ", code, ")");
  }
  return Error(ReasonOfCode(code), absl::StrCat(op.name, " (plugin ", op.origin, "): ", message),
               {{"op", op.name}, {"plugin", op.origin}});
}

tensord_error NoError() {
  tensord_error e;
  e.code = TENSORD_OK;
  e.message[0] = '\0';
  return e;
}

// A dtype the plugin ABI has no number for never reaches a plugin.
absl::Status CheckDType(const PluginOp& op, size_t index, DType dtype) {
  if (static_cast<int>(dtype) < kAbiDTypes) return absl::OkStatus();
  return Error(Reason::kDtypeMismatch,
               absl::StrCat(op.name, " (plugin ", op.origin, "): input ", index, " has dtype ",
                            DTypeName(dtype), ", which plugin ABI version ",
                            TENSORD_PLUGIN_ABI_VERSION, " cannot pass; cast it with to_dtype"),
               {{"op", op.name}, {"plugin", op.origin}, {"dtype", std::string(DTypeName(dtype))}});
}

absl::StatusOr<std::vector<TensorMeta>> RunShapeRule(const PluginOp& op,
                                                     absl::Span<const TensorMeta> inputs,
                                                     const Attrs& attrs) {
  // The dispatcher computes calls with storage operands in their compute dtype
  // (storage_dtypes.h), so the rule sees bf16/f16 operands as f32 and u8/i8/i16 ones as i32, and
  // an f32 (i32) output is stored in their dtype, as an op on 2-byte float (narrow integer)
  // tensors gives a result of that dtype in PyTorch (promoted when two of them meet).
  std::optional<DType> low, narrow;
  for (const TensorMeta& m : inputs) {
    std::optional<DType>& slot = IsLowPrecision(m.dtype) ? low : narrow;
    if (IsStorageOnly(m.dtype)) slot = slot ? PromoteTypes(*slot, m.dtype) : m.dtype;
  }
  CallFrame frame(op, attrs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DType dtype = ComputeDType(inputs[i].dtype);
    RETURN_IF_ERROR(CheckDType(op, i, dtype));
    frame.Add(ToC(dtype, inputs[i].shape, nullptr));
  }
  std::vector<tensord_meta> out(op.num_outputs);
  for (tensord_meta& m : out) {
    m.dtype = -1;
    m.rank = 0;
  }
  tensord_error error = NoError();
  if (int32_t code = op.shape(frame.call(), out.data(), op.num_outputs, &error); code != 0) {
    return Failure(op, "shape rule", code, error);
  }
  std::vector<TensorMeta> metas;
  for (int k = 0; k < op.num_outputs; ++k) {
    const tensord_meta& m = out[k];
    auto bad = [&](absl::string_view what) {
      return Error(Reason::kInternal,
                   absl::StrCat(op.name, " (plugin ", op.origin, "): the shape rule gave output ",
                                k, " ", what),
                   {{"op", op.name}, {"plugin", op.origin}});
    };
    if (m.dtype < 0 || m.dtype >= kAbiDTypes) return bad(absl::StrCat("dtype ", m.dtype));
    if (m.rank < 0 || m.rank > TENSORD_PLUGIN_MAX_RANK) return bad(absl::StrCat("rank ", m.rank));
    Shape shape(m.shape, m.shape + m.rank);
    for (int64_t d : shape) {
      if (d < 0) return bad(absl::StrCat("the negative dimension ", d));
    }
    RETURN_IF_ERROR(CheckedNumElements(shape).status());
    DType dtype = static_cast<DType>(m.dtype);
    if (low && dtype == DType::kF32) dtype = *low;
    if (narrow && dtype == DType::kI32) dtype = *narrow;
    metas.push_back({dtype, std::move(shape)});
  }
  return metas;
}

absl::Status RunForward(const PluginOp& op, KernelCall& call) {
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    RETURN_IF_ERROR(CheckDType(op, i, call.inputs[i].dtype()));
  }
  CallFrame frame(op, call.attrs);
  for (const Tensor& t : call.inputs) frame.Add(ToC(t));
  std::vector<tensord_tensor> outputs;
  for (const Tensor& t : call.outputs) outputs.push_back(ToC(t));
  tensord_error error = NoError();
  int32_t code = op.cpu_kernel(frame.call(), outputs.data(), op.num_outputs, &error);
  return code == 0 ? absl::OkStatus() : Failure(op, "CPU kernel", code, error);
}

// The "<name>_backward" kernel: inputs are the forward's inputs, outputs and output
// gradients; outputs are the input gradients, zero-filled before the plugin writes them.
absl::Status RunBackward(const PluginOp& op, KernelCall& call) {
  const size_t n_out = op.num_outputs;
  const size_t n_in = call.inputs.size() - 2 * n_out;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    RETURN_IF_ERROR(CheckDType(op, i, call.inputs[i].dtype()));
  }
  for (const Tensor& g : call.outputs) RETURN_IF_ERROR(CheckDType(op, 0, g.dtype()));
  CallFrame frame(op, call.attrs);
  std::vector<tensord_tensor> outputs, grad_outputs, grad_inputs;
  for (size_t i = 0; i < n_in; ++i) frame.Add(ToC(call.inputs[i]));
  for (size_t k = 0; k < n_out; ++k) {
    outputs.push_back(ToC(call.inputs[n_in + k]));
    grad_outputs.push_back(ToC(call.inputs[n_in + n_out + k]));
  }
  for (Tensor& g : call.outputs) {
    if (g.nbytes()) std::memset(g.raw(), 0, g.nbytes());
    grad_inputs.push_back(ToC(g));
  }
  tensord_error error = NoError();
  int32_t code = op.backward(frame.call(), outputs.data(), grad_outputs.data(), op.num_outputs,
                             grad_inputs.data(), &error);
  return code == 0 ? absl::OkStatus() : Failure(op, "backward kernel", code, error);
}

}  // namespace

absl::StatusOr<PluginOp> ParseOpDef(const tensord_op_def& def, const std::string& origin) {
  if (!ValidName(def.name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an op has no valid name (", def.name ? absl::StrCat("'", def.name, "'") : "NULL",
        "; names match [a-z][a-z0-9_]*, at most ", kMaxNameLength, " characters)"));
  }
  PluginOp op;
  op.name = def.name;
  op.origin = origin;
  op.doc = def.doc ? def.doc : "";
  if (def.min_inputs < 1) {
    return Malformed(op.name, absl::StrCat("min_inputs must be at least 1, got ", def.min_inputs));
  }
  if (def.max_inputs != TENSORD_VARIADIC && def.max_inputs < def.min_inputs) {
    return Malformed(op.name, absl::StrCat("max_inputs ", def.max_inputs, " is below min_inputs ",
                                           def.min_inputs, " (TENSORD_VARIADIC for any number)"));
  }
  if (def.num_outputs < 1 || def.num_outputs > kMaxOutputs) {
    return Malformed(op.name, absl::StrCat("num_outputs must be in [1, ", kMaxOutputs, "], got ",
                                           def.num_outputs));
  }
  op.min_inputs = def.min_inputs;
  op.max_inputs = def.max_inputs == TENSORD_VARIADIC ? kVariadic : def.max_inputs;
  op.num_outputs = def.num_outputs;
  if (def.num_input_names < 0 || (def.num_input_names > 0 && def.input_names == nullptr)) {
    return Malformed(op.name, absl::StrCat("num_input_names is ", def.num_input_names,
                                           " with input_names ", def.input_names ? "set" : "NULL"));
  }
  for (int i = 0; i < def.num_input_names; ++i) {
    if (def.input_names[i] == nullptr) {
      return Malformed(op.name, absl::StrCat("input name ", i, " is NULL"));
    }
    op.input_names.push_back(def.input_names[i]);
  }
  if (def.num_attrs < 0 || (def.num_attrs > 0 && def.attrs == nullptr)) {
    return Malformed(op.name, absl::StrCat("num_attrs is ", def.num_attrs, " with attrs ",
                                           def.attrs ? "set" : "NULL"));
  }
  std::set<std::string> attr_names;
  for (int i = 0; i < def.num_attrs; ++i) {
    ASSIGN_OR_RETURN(AttrSpec spec, ParseAttr(op.name, def.attrs[i], i));
    if (!attr_names.insert(spec.name).second) {
      return Malformed(op.name, absl::StrCat("attribute '", spec.name, "' is declared twice"));
    }
    op.attrs.push_back(std::move(spec));
  }
  if (def.dtypes & ~kAllDTypeBits) {
    return Malformed(op.name, absl::StrCat("dtypes has unknown bits (0x", absl::Hex(def.dtypes),
                                           "); use TENSORD_DTYPE_BIT"));
  }
  op.dtypes = DTypeSet(def.dtypes ? def.dtypes : kAllDTypeBits);
  if (def.shape == nullptr) return Malformed(op.name, "no shape rule");
  if (def.cpu_kernel == nullptr) return Malformed(op.name, "no CPU kernel");
  if (def.backward != nullptr && def.non_differentiable) {
    return Malformed(op.name,
                     "has a backward kernel and is marked non-differentiable; give one or neither");
  }
  op.shape = def.shape;
  op.cpu_kernel = def.cpu_kernel;
  op.backward = def.backward;
  op.non_differentiable = def.non_differentiable != 0;
  op.user_data = def.user_data;
  return op;
}

std::string BackwardOpName(const std::string& op) { return op + "_backward"; }

std::vector<OpDef> MakeOpDefs(const std::shared_ptr<const PluginOp>& op) {
  OpDef d;
  d.name = op->name;
  d.category = "plugin";
  d.min_inputs = op->min_inputs;
  d.max_inputs = op->max_inputs;
  d.input_names = op->input_names;
  d.attrs = op->attrs;
  d.dtypes = op->dtypes;
  d.marking = op->backward             ? Marking::kDifferentiable
              : op->non_differentiable ? Marking::kNonDifferentiable
                                       : Marking::kUnmarked;
  d.infer = [op](absl::Span<const TensorMeta> inputs, const Attrs& attrs) {
    return RunShapeRule(*op, inputs, attrs);
  };
  // The server cannot know that a plugin kernel is cheap or deterministic, so BALANCED
  // checkpointing keeps its values instead of re-running it during backward.
  d.compute_bound = true;
  d.origin = op->origin;
  d.doc = op->doc;
  std::vector<OpDef> defs;
  if (!op->backward) {
    defs.push_back(std::move(d));
    return defs;
  }
  const std::string backward_name = BackwardOpName(op->name);
  d.backward = [op, backward_name](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    std::vector<Tensor> args(g.inputs.begin(), g.inputs.end());
    args.insert(args.end(), g.outputs.begin(), g.outputs.end());
    args.insert(args.end(), g.grad_outputs.begin(), g.grad_outputs.end());
    ASSIGN_OR_RETURN(std::vector<Tensor> grads,
                     g.run.Run(backward_name, std::move(args), g.attrs.map()));
    for (size_t i = 0; i < grads.size(); ++i) {
      if (i >= g.needs_input_grad.size() || !g.needs_input_grad[i]) grads[i] = Tensor();
    }
    return grads;
  };
  defs.push_back(std::move(d));

  const int extra = 2 * op->num_outputs;
  OpDef b;
  b.name = backward_name;
  b.category = "plugin";
  b.internal = true;
  b.min_inputs = op->min_inputs + extra;
  b.max_inputs = op->max_inputs == kVariadic ? kVariadic : op->max_inputs + extra;
  b.attrs = op->attrs;
  b.dtypes = op->dtypes;
  b.marking = Marking::kUnmarked;
  b.infer = [extra](absl::Span<const TensorMeta> in,
                    const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    return std::vector<TensorMeta>(in.begin(), in.end() - extra);
  };
  b.origin = op->origin;
  b.doc = absl::StrCat("gradients of ", op->name, "'s inputs (the plugin's backward kernel)");
  defs.push_back(std::move(b));
  return defs;
}

std::vector<std::pair<std::string, cpu::Kernel>> MakeKernels(
    const std::shared_ptr<const PluginOp>& op) {
  const DTypeSet dtypes = op->dtypes;
  auto supports = [dtypes](absl::Span<const DType> d, const Attrs*) {
    return d.empty() || dtypes.Contains(d[0]);
  };
  std::vector<std::pair<std::string, cpu::Kernel>> kernels;
  kernels.emplace_back(op->name,
                       cpu::Kernel{absl::StrCat("plugin_", op->name), supports,
                                   [op](KernelCall& call) { return RunForward(*op, call); }});
  if (op->backward) {
    const std::string name = BackwardOpName(op->name);
    kernels.emplace_back(name,
                         cpu::Kernel{absl::StrCat("plugin_", name), supports,
                                     [op](KernelCall& call) { return RunBackward(*op, call); }});
  }
  return kernels;
}

}  // namespace tensord::plugins
