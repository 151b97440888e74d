#include "server/dispatch/low_precision.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/dispatch/dispatcher.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {

// The bf16/f16 dtype a kDType attribute names, if any (creation ops, to_dtype, sum's dtype).
std::optional<DType> LowPrecisionAttr(const OpDef& def, const Attrs& attrs) {
  for (const AttrSpec& spec : def.attrs) {
    if (spec.type != AttrType::kDType) continue;
    std::optional<DType> d = attrs.GetDType(spec.name);
    if (d && IsLowPrecision(*d)) return d;
  }
  return std::nullopt;
}

AttrMap F32Attrs(const OpDef& def, const Attrs& attrs) {
  AttrMap map = attrs.map();
  for (const AttrSpec& spec : def.attrs) {
    if (spec.type != AttrType::kDType) continue;
    std::optional<DType> d = attrs.GetDType(spec.name);
    if (d && IsLowPrecision(*d)) map[spec.name] = std::string(DTypeName(DType::kF32));
  }
  return map;
}

absl::StatusOr<Tensor> Cast(const Dispatcher& dispatcher, const Tensor& t, DType dtype,
                            const CallEnv& plain) {
  ASSIGN_OR_RETURN(
      std::vector<Tensor> out,
      dispatcher.Call(opname::to_dtype, {t}, {{"dtype", std::string(DTypeName(dtype))}}, plain));
  return std::move(out[0]);
}

}  // namespace

absl::StatusOr<std::optional<std::vector<Tensor>>> RunLowPrecisionInF32(
    const Dispatcher& dispatcher, const OpDef& def, const std::vector<Tensor>& inputs,
    const Attrs& attrs, const std::string& device, const CallEnv& env) {
  const bool low_input = std::any_of(inputs.begin(), inputs.end(),
                                     [](const Tensor& t) { return IsLowPrecision(t.dtype()); });
  const std::optional<DType> low_attr = LowPrecisionAttr(def, attrs);
  if ((!low_input && !low_attr) || def.name == "to_dtype") return std::nullopt;

  std::vector<TensorMeta> metas;
  std::vector<DType> query;
  for (const Tensor& t : inputs) {
    metas.push_back(t.meta());
    query.push_back(t.dtype());
  }
  absl::StatusOr<std::vector<TensorMeta>> inferred = def.infer(metas, attrs);
  if (inferred.ok()) {
    // A kernel declaring bf16/f16 support takes the call as is. Low-precision output dtypes
    // join the query, so that a kernel that only knows compute dtypes is never handed a
    // bf16/f16 output to fill (zeros with dtype bf16, sum with dtype f16).
    for (const TensorMeta& m : *inferred) {
      if (IsLowPrecision(m.dtype)) query.push_back(m.dtype);
    }
    ASSIGN_OR_RETURN(Backend * backend, dispatcher.BackendFor(device));
    if (backend->Supports({def, query, &attrs, metas, *inferred, device})) return std::nullopt;
  } else if (!low_attr) {
    return inferred.status();
  }

  if (def.in_place || !def.mutates_inputs.empty()) {
    // Computing in f32 copies would write the copies and leave the caller's tensors as they
    // were: refused rather than silently doing nothing.
    const Tensor& low = *std::find_if(inputs.begin(), inputs.end(),
                                      [](const Tensor& t) { return IsLowPrecision(t.dtype()); });
    return Error(Reason::kDtypeMismatch,
                 absl::StrCat(def.name, ": writes its inputs in place, and no kernel of ", device,
                              " writes ", DTypeName(low.dtype()),
                              " tensors in place; keep these tensors in f32 (master weights)"),
                 {{"op", def.name}, {"dtype", std::string(DTypeName(low.dtype()))}});
  }
  CallEnv plain = env;
  plain.no_grad = true;
  std::vector<Tensor> f32_inputs = inputs;
  for (Tensor& t : f32_inputs) {
    if (IsLowPrecision(t.dtype())) {
      const bool wrapped = t.wrapped_number();
      ASSIGN_OR_RETURN(t, Cast(dispatcher, t, DType::kF32, plain));
      t.set_wrapped_number(wrapped);
    }
  }
  ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                   dispatcher.Call(def, std::move(f32_inputs), F32Attrs(def, attrs), plain));
  for (size_t k = 0; k < outs.size(); ++k) {
    DType want = outs[k].dtype();
    if (inferred.ok() && k < inferred->size()) {
      want = (*inferred)[k].dtype;
    } else if (outs[k].dtype() == DType::kF32) {
      want = *low_attr;  // a creation op whose own rule lists compute dtypes only
    }
    if (want != outs[k].dtype()) {
      ASSIGN_OR_RETURN(outs[k], Cast(dispatcher, outs[k], want, plain));
    }
  }
  return std::optional<std::vector<Tensor>>(std::move(outs));
}

}  // namespace tensord
