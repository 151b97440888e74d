#include "server/ops/op_helpers.h"

namespace tensord::ops {

OpDef NewOp(std::string name, std::string category, std::vector<std::string> input_names,
            DTypeSet dtypes, Marking marking) {
  OpDef d;
  d.name = std::move(name);
  d.category = std::move(category);
  d.min_inputs = d.max_inputs = static_cast<int>(input_names.size());
  d.input_names = std::move(input_names);
  d.dtypes = dtypes;
  d.marking = marking;
  return d;
}

OpDef NewInternalOp(std::string name, std::string category, std::vector<std::string> input_names,
                    DTypeSet dtypes, Marking marking) {
  OpDef d = NewOp(std::move(name), std::move(category), std::move(input_names), dtypes, marking);
  d.internal = true;
  return d;
}

InferFn SameAs(int index) {
  return [index](absl::Span<const TensorMeta> in,
                 const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    return std::vector<TensorMeta>{in[index]};
  };
}

InferFn SameShapeAs(DType dtype) {
  return [dtype](absl::Span<const TensorMeta> in,
                 const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    return std::vector<TensorMeta>{{dtype, in[0].shape}};
  };
}

namespace {
absl::StatusOr<Shape> BroadcastMetas(absl::Span<const TensorMeta> in) {
  Shape out;
  for (const TensorMeta& m : in) {
    ASSIGN_OR_RETURN(out, BroadcastShapes(out, m.shape));
  }
  return out;
}
}  // namespace

InferFn Broadcast() {
  return
      [](absl::Span<const TensorMeta> in, const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
        ASSIGN_OR_RETURN(Shape s, BroadcastMetas(in));
        return std::vector<TensorMeta>{{in.back().dtype, s}};
      };
}

InferFn BroadcastTo(DType out) {
  return [out](absl::Span<const TensorMeta> in,
               const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(Shape s, BroadcastMetas(in));
    return std::vector<TensorMeta>{{out, s}};
  };
}

absl::Status ShapeError(const std::string& op, const std::string& what) {
  return Error(Reason::kShapeMismatch, absl::StrCat(op, ": ", what), {{"op", op}});
}

absl::Status AttrError(const std::string& op, const std::string& attr, const std::string& what) {
  return Error(Reason::kBadAttribute, absl::StrCat(op, ": attribute '", attr, "' ", what),
               {{"op", op}, {"attribute", attr}});
}

absl::Status DtypeError(const std::string& op, const std::string& what) {
  return Error(Reason::kDtypeMismatch, absl::StrCat(op, ": ", what), {{"op", op}});
}

absl::Status SameDtype(const std::string& op, absl::Span<const TensorMeta> in) {
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].dtype != in[0].dtype) {
      return DtypeError(
          op, absl::StrCat("input 0 is ", DTypeName(in[0].dtype), " but input ", i, " is ",
                           DTypeName(in[i].dtype), "; they must have one dtype"));
    }
  }
  return absl::OkStatus();
}

Tensor GradOps::Scalar(double v) {
  Tensor t = Tensor::Scalar<double>(v);
  t.set_wrapped_number(true);
  return t;
}

}  // namespace tensord::ops
