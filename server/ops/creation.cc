// Creation ops: tensors from attributes (zeros, ones, full, arange, random) and *_like.
#include "server/ops/op_helpers.h"

namespace tensord {
namespace {
using namespace ops;

// Output dtype from the "dtype" attribute, else `def`.
DType AttrDType(const Attrs& attrs, DType def) { return attrs.GetDType("dtype").value_or(def); }

absl::StatusOr<Shape> ShapeAttr(const std::string& op, const Attrs& attrs) {
  Shape shape = attrs.GetInts("shape");
  auto n = CheckedNumElements(shape);
  if (!n.ok()) return WithMetadata(n.status(), {{"op", op}, {"attribute", "shape"}});
  return shape;
}

OpDef Filled(const std::string& name, bool with_value) {
  OpDef d;
  d.name = name;
  d.category = "creation";
  d.min_inputs = d.max_inputs = 0;
  d.attrs = {RequiredIntsAttr("shape"), DTypeAttr("dtype")};
  if (with_value) d.attrs.push_back(RequiredFloatAttr("value"));
  d.dtypes = kAll;
  d.creation = true;
  d.marking = Marking::kNonDifferentiable;
  d.infer = [name](absl::Span<const TensorMeta>,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(Shape s, ShapeAttr(name, a));
    return std::vector<TensorMeta>{{AttrDType(a, DType::kF32), s}};
  };
  return d;
}

OpDef FilledLike(const std::string& name, bool with_value) {
  OpDef d;
  d.name = name;
  d.category = "creation";
  d.input_names = {"input"};
  d.attrs = {DTypeAttr("dtype")};
  if (with_value) d.attrs.push_back(RequiredFloatAttr("value"));
  d.dtypes = kAll;
  d.marking = Marking::kNonDifferentiable;
  d.infer = [](absl::Span<const TensorMeta> in,
               const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    return std::vector<TensorMeta>{{AttrDType(a, in[0].dtype), in[0].shape}};
  };
  return d;
}

}  // namespace

void RegisterCreationOps(OpRegistry& r) {
  MustAdd(r, Filled("zeros", false));
  MustAdd(r, Filled("ones", false));
  MustAdd(r, Filled("full", true));
  MustAdd(r, FilledLike("zeros_like", false));
  MustAdd(r, FilledLike("ones_like", false));
  MustAdd(r, FilledLike("full_like", true));
}

}  // namespace tensord
