// Building blocks for op table entries: attribute specs, common shape rules and the small
// vocabulary backward rules are written in.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/ops/op_def.h"
#include "server/ops/op_names.h"
#include "server/ops/registry.h"

namespace tensord::ops {

// ---- Entries ----------------------------------------------------------------------------------
// What every entry starts from: its name, family (`category`), tensor inputs (one per name, so
// min_inputs = max_inputs = their number; an op with optional trailing inputs lowers
// min_inputs), the dtypes its primary operand accepts and its autodiff marking. The caller adds
// attributes, rules and doc.
OpDef NewOp(std::string name, std::string category, std::vector<std::string> input_names,
            DTypeSet dtypes, Marking marking);
// The same for a helper op of backward rules and composites (`internal`: hidden from clients).
// It stays unmarked unless a composite runs it under autodiff, which then needs its rule.
OpDef NewInternalOp(std::string name, std::string category, std::vector<std::string> input_names,
                    DTypeSet dtypes, Marking marking = Marking::kUnmarked);

// ---- Attribute specs --------------------------------------------------------------------------
inline AttrSpec IntAttr(std::string name, int64_t def) {
  return {std::move(name), AttrType::kInt, def};
}
inline AttrSpec FloatAttr(std::string name, double def) {
  return {std::move(name), AttrType::kFloat, def};
}
inline AttrSpec BoolAttr(std::string name, bool def) {
  return {std::move(name), AttrType::kBool, def};
}
inline AttrSpec StringAttr(std::string name, std::string def,
                           std::vector<std::string> choices = {}) {
  return {std::move(name), AttrType::kString, std::move(def), false, std::move(choices)};
}
inline AttrSpec IntsAttr(std::string name) { return {std::move(name), AttrType::kInts, {}}; }
inline AttrSpec RequiredIntsAttr(std::string name) {
  return {std::move(name), AttrType::kInts, {}, true};
}
inline AttrSpec RequiredIntAttr(std::string name) {
  return {std::move(name), AttrType::kInt, {}, true};
}
inline AttrSpec RequiredFloatAttr(std::string name) {
  return {std::move(name), AttrType::kFloat, {}, true};
}
inline AttrSpec OptionalIntAttr(std::string name) { return {std::move(name), AttrType::kInt, {}}; }
inline AttrSpec OptionalFloatAttr(std::string name) {
  return {std::move(name), AttrType::kFloat, {}};
}
inline AttrSpec DTypeAttr(std::string name) { return {std::move(name), AttrType::kDType, {}}; }
// `spec`, also accepted under PyTorch's names `aliases`.
inline AttrSpec Aliased(AttrSpec spec, std::vector<std::string> aliases) {
  spec.aliases = std::move(aliases);
  return spec;
}

// ---- Shape rules ------------------------------------------------------------------------------
// Output k has input `index`'s dtype and shape.
InferFn SameAs(int index = 0);
// Same shape as input 0, dtype `dtype`.
InferFn SameShapeAs(DType dtype);
// Broadcast of all inputs; dtype of input 0 (inputs were promoted) or `out` when given.
InferFn Broadcast();
InferFn BroadcastTo(DType out);

// ---- Errors -----------------------------------------------------------------------------------
absl::Status ShapeError(const std::string& op, const std::string& what);
absl::Status AttrError(const std::string& op, const std::string& attr, const std::string& what);
absl::Status DtypeError(const std::string& op, const std::string& what);
// DTYPE_MISMATCH unless every input has input 0's dtype (ops that do not promote).
absl::Status SameDtype(const std::string& op, absl::Span<const TensorMeta> in);

// ---- Backward vocabulary (runs ops without recording) -----------------------------------------
// Each returns StatusOr<Tensor>; compose with ASSIGN_OR_RETURN.
class GradOps {
 public:
  explicit GradOps(OpRunner& run) : run_(run) {}
  absl::StatusOr<Tensor> Op(const std::string& op, std::vector<Tensor> in, AttrMap attrs = {}) {
    return run_.Run1(op, std::move(in), std::move(attrs));
  }
  absl::StatusOr<Tensor> Add(const Tensor& a, const Tensor& b) { return Op(opname::add, {a, b}); }
  absl::StatusOr<Tensor> Sub(const Tensor& a, const Tensor& b) { return Op(opname::sub, {a, b}); }
  absl::StatusOr<Tensor> Mul(const Tensor& a, const Tensor& b) { return Op(opname::mul, {a, b}); }
  absl::StatusOr<Tensor> Div(const Tensor& a, const Tensor& b) { return Op(opname::div, {a, b}); }
  absl::StatusOr<Tensor> Neg(const Tensor& a) { return Op(opname::neg, {a}); }
  // a * s for a float scalar s.
  absl::StatusOr<Tensor> Scale(const Tensor& a, double s) {
    return Op(opname::mul, {a, Scalar(s)});
  }
  absl::StatusOr<Tensor> Sum(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
    return Op(opname::sum, {a}, {{"dim", dims}, {"keepdim", keepdim}});
  }
  absl::StatusOr<Tensor> Reshape(const Tensor& a, Shape shape) {
    return Op(opname::reshape, {a}, {{"shape", shape}});
  }
  absl::StatusOr<Tensor> Expand(const Tensor& a, Shape shape) {
    return Op(opname::expand, {a}, {{"size", shape}});
  }
  absl::StatusOr<Tensor> ZerosLike(const Tensor& a) { return Op(opname::zeros_like, {a}); }
  // A wrapped scalar: takes the other operand's dtype under promotion.
  static Tensor Scalar(double v);
  OpRunner& runner() { return run_; }

 private:
  OpRunner& run_;
};

}  // namespace tensord::ops
