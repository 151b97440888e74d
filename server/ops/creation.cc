// Creation ops: tensors from attributes (zeros, ones, full, arange, eye, random) and *_like.
#include <cmath>
#include <limits>

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

// Creation ops have no input to take a device from: they make their output on the session's
// device unless `device` names another (as torch.zeros(..., device=)).
AttrSpec DeviceAttr() { return {"device", AttrType::kString, {}}; }

OpDef Filled(const std::string& name, bool with_value) {
  OpDef d = NewOp(name, "creation", {}, kAll, Marking::kNonDifferentiable);
  d.attrs = {Aliased(RequiredIntsAttr("shape"), {"size"}), DTypeAttr("dtype")};
  if (with_value) d.attrs.push_back(Aliased(RequiredFloatAttr("value"), {"fill_value"}));
  d.attrs.push_back(DeviceAttr());
  d.creation = true;
  d.infer = [name](absl::Span<const TensorMeta>,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(Shape s, ShapeAttr(name, a));
    const DType dtype = AttrDType(a, DType::kF32);
    if (a.Has("value") && IsInt(dtype) && !FitsIn(dtype, a.GetFloat("value"))) {
      return AttrError(name, "value",
                       absl::StrCat("= ", a.GetFloat("value"), " cannot be stored in a ",
                                    DTypeName(dtype), " tensor"));
    }
    return std::vector<TensorMeta>{{dtype, s}};
  };
  return d;
}

OpDef FilledLike(const std::string& name, bool with_value) {
  OpDef d = NewOp(name, "creation", {"input"}, kAll, Marking::kNonDifferentiable);
  d.attrs = {DTypeAttr("dtype")};
  if (with_value) d.attrs.push_back(Aliased(RequiredFloatAttr("value"), {"fill_value"}));
  d.infer = [](absl::Span<const TensorMeta> in,
               const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    return std::vector<TensorMeta>{{AttrDType(a, in[0].dtype), in[0].shape}};
  };
  return d;
}

bool Integral(double v) { return std::isfinite(v) && v == std::trunc(v); }

// torch.arange's checks and length: ceil((end - start) / step), computed exactly for integral
// i64 ranges as torch does.
absl::StatusOr<int64_t> ArangeLength(double start, double end, double step, DType dtype) {
  if (!std::isfinite(start) || !std::isfinite(end)) {
    return AttrError("arange", "end", absl::StrCat("unsupported range ", start, " -> ", end));
  }
  if (step == 0 || !std::isfinite(step)) {
    return AttrError("arange", "step", absl::StrCat("must be nonzero and finite, got ", step));
  }
  if ((step > 0 && end < start) || (step < 0 && end > start)) {
    return AttrError(
        "arange", "step",
        absl::StrCat("= ", step, " has the wrong sign for the range ", start, " -> ", end));
  }
  double length;
  const bool exact = dtype == DType::kI64 && Integral(start) && Integral(end) && Integral(step) &&
                     std::fabs(start) < 0x1p62 && std::fabs(end) < 0x1p62 &&
                     std::fabs(step) < 0x1p62;
  if (exact) {
    const int64_t s = static_cast<int64_t>(start), e = static_cast<int64_t>(end);
    const int64_t st = static_cast<int64_t>(step), sgn = st > 0 ? 1 : -1;
    length = static_cast<double>((e - s + st - sgn) / st);
  } else {
    length = std::ceil((end - start) / step);
  }
  if (!(length <= 0x1p62)) {
    return Error(
        Reason::kLimitExceeded,
        absl::StrCat("arange: ", start, " -> ", end, " by ", step, " has too many elements"),
        {{"op", "arange"}, {"limit", "element_count"}});
  }
  return static_cast<int64_t>(length);
}

// The length of an integer range given as integers, in integer arithmetic: values past 2^53
// have no exact double. The span is taken unsigned, where it cannot overflow.
absl::StatusOr<int64_t> ExactArangeLength(int64_t start, int64_t end, int64_t step) {
  if (step == 0) return AttrError("arange", "step", "must be nonzero and finite, got 0");
  if ((step > 0 && end < start) || (step < 0 && end > start)) {
    return AttrError(
        "arange", "step",
        absl::StrCat("= ", step, " has the wrong sign for the range ", start, " -> ", end));
  }
  const uint64_t span = step > 0 ? static_cast<uint64_t>(end) - static_cast<uint64_t>(start)
                                 : static_cast<uint64_t>(start) - static_cast<uint64_t>(end);
  const uint64_t stride = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  const uint64_t length = span / stride + (span % stride != 0);
  if (length > (uint64_t{1} << 62)) {
    return Error(
        Reason::kLimitExceeded,
        absl::StrCat("arange: ", start, " -> ", end, " by ", step, " has too many elements"),
        {{"op", "arange"}, {"limit", "element_count"}});
  }
  return static_cast<int64_t>(length);
}

absl::StatusOr<std::vector<TensorMeta>> ArangeInfer(absl::Span<const TensorMeta>, const Attrs& a) {
  const double start = a.GetNumber("start"), end = a.GetNumber("end"), step = a.GetNumber("step");
  // torch picks i64 only when every bound is a Python int: arange(5) is i64, arange(5.0) f32.
  // kScalar attributes keep the number as the client sent it, so the wire can tell.
  const bool ints = a.HoldsInt("start") && a.HoldsInt("end") && a.HoldsInt("step");
  const DType dtype = AttrDType(a, ints ? DType::kI64 : DType::kF32);
  if (IsBool(dtype)) {
    return DtypeError("arange", "dtype bool is not supported (f32, f64, i32, i64)");
  }
  if (ints && IsInt(dtype)) {
    ASSIGN_OR_RETURN(int64_t n,
                     ExactArangeLength(a.GetInt("start"), a.GetInt("end"), a.GetInt("step")));
    return std::vector<TensorMeta>{{dtype, Shape{n}}};
  }
  // Integer outputs convert start and step to integers, which must exist.
  if (IsInt(dtype) && !(std::fabs(start) < 0x1p63 && std::fabs(step) < 0x1p63)) {
    return AttrError("arange", "start",
                     absl::StrCat("start ", start, " and step ", step, " must fit in i64 for a ",
                                  DTypeName(dtype), " output"));
  }
  ASSIGN_OR_RETURN(int64_t n, ArangeLength(start, end, step, dtype));
  return std::vector<TensorMeta>{{dtype, Shape{n}}};
}

// torch.eye: n rows, m columns (default n), ones on the main diagonal.
absl::StatusOr<std::vector<TensorMeta>> EyeInfer(absl::Span<const TensorMeta>, const Attrs& a) {
  const int64_t n = a.GetInt("n"), m = a.Has("m") ? a.GetInt("m") : n;
  for (const auto& [attr, v] : {std::pair<const char*, int64_t>{"n", n}, {"m", m}}) {
    if (v < 0) return AttrError("eye", attr, absl::StrCat("must be non-negative, got ", v));
  }
  const DType dtype = AttrDType(a, DType::kF32);
  if (!kFloatInt.Contains(dtype)) {
    return DtypeError("eye", absl::StrCat("dtype ", DTypeName(dtype), " is not supported (",
                                          kFloatInt.ToString(), ")"));
  }
  auto count = CheckedNumElements({n, m});
  if (!count.ok()) return WithMetadata(count.status(), {{"op", "eye"}});
  return std::vector<TensorMeta>{{dtype, Shape{n, m}}};
}

OpDef RandomOp(const std::string& name, DTypeSet dtypes, DType def) {
  OpDef d = NewOp(name, "creation", {}, dtypes, Marking::kNonDifferentiable);
  d.attrs = {Aliased(RequiredIntsAttr("shape"), {"size"}), DTypeAttr("dtype"),
             OptionalIntAttr("seed"), DeviceAttr()};
  d.creation = true;
  d.infer = [name, dtypes, def](absl::Span<const TensorMeta>,
                                const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(Shape s, ShapeAttr(name, a));
    const DType dtype = AttrDType(a, def);
    if (!WithStorageDTypes(dtypes).Contains(dtype)) {
      return DtypeError(name, absl::StrCat("dtype ", DTypeName(dtype), " is not supported (",
                                           WithStorageDTypes(dtypes).ToString(), ")"));
    }
    if (name == "randint") {
      const int64_t low = a.GetInt("low"), high = a.GetInt("high");
      if (high <= low) {
        return AttrError(name, "high",
                         absl::StrCat("(", high, ") must be greater than low (", low, ")"));
      }
      const IntRange range = RangeOf(dtype);
      if (IsInt(dtype) &&
          (!range.Holds(static_cast<double>(low)) || !range.Holds(static_cast<double>(high - 1)))) {
        return AttrError(
            name, "high",
            absl::StrCat("range [", low, ", ", high, ") does not fit in ", DTypeName(dtype)));
      }
    }
    return std::vector<TensorMeta>{{dtype, s}};
  };
  d.doc = "Same seed, same values; without a seed each call draws a fresh stream.";
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

  OpDef arange = NewOp("arange", "creation", {}, kFloatInt, Marking::kNonDifferentiable);
  arange.attrs = {{"start", AttrType::kScalar, int64_t{0}},
                  {"end", AttrType::kScalar, {}, true},
                  {"step", AttrType::kScalar, int64_t{1}},
                  DTypeAttr("dtype"),
                  DeviceAttr()};
  arange.creation = true;
  arange.infer = ArangeInfer;
  arange.doc =
      "Default dtype i64 when start, end and step are all given as integers (as torch.arange "
      "with Python ints), else f32. Integer outputs truncate start and step first, as torch "
      "does.";
  MustAdd(r, std::move(arange));

  OpDef eye = NewOp("eye", "creation", {}, kFloatInt, Marking::kNonDifferentiable);
  eye.attrs = {RequiredIntAttr("n"), OptionalIntAttr("m"), DTypeAttr("dtype"), DeviceAttr()};
  eye.creation = true;
  eye.infer = EyeInfer;
  MustAdd(r, std::move(eye));

  MustAdd(r, RandomOp("rand", kFloat, DType::kF32));
  MustAdd(r, RandomOp("randn", kFloat, DType::kF32));
  OpDef randint = RandomOp("randint", kFloatInt, DType::kI64);
  randint.attrs.push_back(IntAttr("low", 0));
  randint.attrs.push_back(RequiredIntAttr("high"));
  MustAdd(r, std::move(randint));
}

}  // namespace tensord
