#include "server/dispatch/storage_dtypes.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/dispatch/dispatcher.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {

// The storage dtype a kDType attribute names, if any (creation ops, to_dtype, sum's dtype).
std::optional<DType> StorageAttr(const OpDef& def, const Attrs& attrs) {
  for (const AttrSpec& spec : def.attrs) {
    if (spec.type != AttrType::kDType) continue;
    std::optional<DType> d = attrs.GetDType(spec.name);
    if (d && IsStorageOnly(*d)) return d;
  }
  return std::nullopt;
}

AttrMap ComputeAttrs(const OpDef& def, const Attrs& attrs) {
  AttrMap map = attrs.map();
  for (const AttrSpec& spec : def.attrs) {
    if (spec.type != AttrType::kDType) continue;
    std::optional<DType> d = attrs.GetDType(spec.name);
    if (d && IsStorageOnly(*d)) map[spec.name] = std::string(DTypeName(ComputeDType(*d)));
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

absl::StatusOr<std::optional<std::vector<Tensor>>> RunStorageDTypesWidened(
    const Dispatcher& dispatcher, const OpDef& def, const std::vector<Tensor>& inputs,
    const Attrs& attrs, const std::string& device, const CallEnv& env) {
  const bool storage_input = std::any_of(inputs.begin(), inputs.end(),
                                         [](const Tensor& t) { return IsStorageOnly(t.dtype()); });
  const std::optional<DType> storage_attr = StorageAttr(def, attrs);
  if ((!storage_input && !storage_attr) || def.name == "to_dtype") return std::nullopt;

  std::vector<TensorMeta> metas;
  std::vector<DType> query;
  for (const Tensor& t : inputs) {
    metas.push_back(t.meta());
    query.push_back(t.dtype());
  }
  absl::StatusOr<std::vector<TensorMeta>> inferred = def.infer(metas, attrs);
  if (inferred.ok()) {
    // A kernel declaring the storage dtypes takes the call as is. Storage output dtypes join
    // the query, so that a kernel that only knows compute dtypes is never handed a storage
    // output to fill (zeros with dtype bf16, sum with dtype u8).
    for (const TensorMeta& m : *inferred) {
      if (IsStorageOnly(m.dtype)) query.push_back(m.dtype);
    }
    ASSIGN_OR_RETURN(Backend * backend, dispatcher.BackendFor(device));
    if (backend->Supports({def, query, &attrs, metas, *inferred, device})) return std::nullopt;
  } else if (!storage_attr || GetReason(inferred.status()) != Reason::kDtypeMismatch) {
    // Only a rule that lists compute dtypes alone is answered in the compute dtype; a range
    // or shape error of the call stands.
    return inferred.status();
  }

  if (def.in_place || !def.mutates_inputs.empty()) {
    // Computing in widened copies would write the copies and leave the caller's tensors as
    // they were: refused rather than silently doing nothing.
    const auto stored = std::find_if(inputs.begin(), inputs.end(),
                                     [](const Tensor& t) { return IsStorageOnly(t.dtype()); });
    const DType d = stored != inputs.end() ? stored->dtype() : *storage_attr;
    return Error(Reason::kDtypeMismatch,
                 absl::StrCat(def.name, ": writes its inputs in place, and no kernel of ", device,
                              " writes ", DTypeName(d), " tensors in place; keep these tensors in ",
                              DTypeName(ComputeDType(d))),
                 {{"op", def.name}, {"dtype", std::string(DTypeName(d))}});
  }
  CallEnv plain = env;
  plain.no_grad = true;
  std::vector<Tensor> wide_inputs = inputs;
  for (Tensor& t : wide_inputs) {
    if (IsStorageOnly(t.dtype())) {
      const bool wrapped = t.wrapped_number();
      ASSIGN_OR_RETURN(t, Cast(dispatcher, t, ComputeDType(t.dtype()), plain));
      t.set_wrapped_number(wrapped);
    }
  }
  ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                   dispatcher.Call(def, std::move(wide_inputs), ComputeAttrs(def, attrs), plain));
  for (size_t k = 0; k < outs.size(); ++k) {
    DType want = outs[k].dtype();
    if (inferred.ok() && k < inferred->size()) {
      want = (*inferred)[k].dtype;
    } else if (storage_attr && outs[k].dtype() == ComputeDType(*storage_attr)) {
      want = *storage_attr;  // a creation op whose own rule lists compute dtypes only
    }
    if (want != outs[k].dtype()) {
      ASSIGN_OR_RETURN(outs[k], Cast(dispatcher, outs[k], want, plain));
    }
  }
  return std::optional<std::vector<Tensor>>(std::move(outs));
}

}  // namespace tensord
