// Layout ops that copy every element to a new place: flip, roll, repeat, tile, and the
// triangle masks tril, triu. Each gradient is the same kind of op in the other direction
// (flip, roll back, sum over the repeats, the same mask).
#include "absl/strings/str_join.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/shape_ops.h"

namespace tensord {
namespace {
using namespace ops;

std::string Ints(const std::vector<int64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

// Size of dim d of `in` read with leading 1s up to `rank` dims.
int64_t PaddedDim(const Shape& in, size_t rank, size_t d) {
  const size_t offset = rank - in.size();
  return d < offset ? 1 : in[d - offset];
}

absl::StatusOr<Shape> RepeatedShape(const std::string& op, const Shape& in, const Attrs& a) {
  ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ResolveRepeats(op, in, a));
  Shape out(repeats.size());
  for (size_t d = 0; d < repeats.size(); ++d) {
    // An empty input may have a huge dim, so the product itself can overflow.
    if (__builtin_mul_overflow(PaddedDim(in, repeats.size(), d), repeats[d], &out[d])) {
      return Error(Reason::kLimitExceeded,
                   absl::StrCat(op, ": repeating ", ShapeToString(in), " by ", Ints(repeats),
                                " overflows dim ", d),
                   {{"op", op}, {"shape", ShapeToString(in)}, {"limit", "element_count"}});
    }
  }
  auto n = CheckedNumElements(out);
  if (!n.ok()) return WithMetadata(n.status(), {{"op", op}});
  return out;
}

// The gradient of repeat/tile: view the gradient as [r0, s0, r1, s1, ...] and sum the r dims.
absl::StatusOr<std::vector<Tensor>> RepeatBackward(const std::string& op, const GradContext& g) {
  const Shape& in = g.inputs[0].shape();
  ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ResolveRepeats(op, in, g.attrs));
  Shape split;
  std::vector<int64_t> sum_dims;
  for (size_t d = 0; d < repeats.size(); ++d) {
    sum_dims.push_back(static_cast<int64_t>(split.size()));
    split.push_back(repeats[d]);
    split.push_back(PaddedDim(in, repeats.size(), d));
  }
  GradOps o(g.run);
  ASSIGN_OR_RETURN(Tensor gx, o.Reshape(g.grad_outputs[0], split));
  if (!sum_dims.empty()) {  // an empty dim list would mean "every dim" to sum
    ASSIGN_OR_RETURN(gx, o.Sum(gx, sum_dims, false));
  }
  ASSIGN_OR_RETURN(gx, o.Reshape(gx, in));
  return std::vector<Tensor>{gx};
}

OpDef Triangle(const std::string& name) {
  OpDef d = ShapeOp(name, {IntAttr("diagonal", 0)});
  d.infer = [name](absl::Span<const TensorMeta> in,
                   const Attrs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    if (in[0].shape.size() < 2) {
      return Error(Reason::kShapeMismatch,
                   absl::StrCat(name, ": input must have at least 2 dims, got shape ",
                                ShapeToString(in[0].shape)),
                   {{"op", name}, {"shape", ShapeToString(in[0].shape)}});
    }
    return std::vector<TensorMeta>{in[0]};
  };
  // The mask is fixed, so the gradient is masked the same way.
  d.backward = [name](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Op(name, {g.grad_outputs[0]}, g.attrs.map()));
    return std::vector<Tensor>{gx};
  };
  d.doc = name == "tril" ? "Keeps elements with col - row <= diagonal of the last two dims."
                         : "Keeps elements with col - row >= diagonal of the last two dims.";
  return d;
}

}  // namespace

namespace ops {

absl::StatusOr<std::vector<int64_t>> FlipDims(const Shape& in, const Attrs& a) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> dims;
  std::vector<bool> seen(std::max<int64_t>(rank, 1), false);
  for (int64_t d : a.GetInts("dims")) {
    ASSIGN_OR_RETURN(int64_t nd, WrapDim("flip", "dims", d, rank));
    if (seen[nd]) {
      return AttrError("flip", "dims",
                       absl::StrCat(Ints(a.GetInts("dims")), " names dim ", nd, " more than once"));
    }
    seen[nd] = true;
    if (rank > 0) dims.push_back(nd);
  }
  return dims;
}

absl::StatusOr<RollSpec> ResolveRoll(const Shape& in, const Attrs& a) {
  const std::vector<int64_t> shifts = a.GetInts("shifts");
  const std::vector<int64_t> dims = a.GetInts("dims");
  const int64_t rank = static_cast<int64_t>(in.size());
  RollSpec r;
  if (dims.empty()) {
    // torch.roll without dims rolls the flattened tensor by one shift.
    if (shifts.size() != 1) {
      return AttrError("roll", "shifts",
                       absl::StrCat("= ", Ints(shifts),
                                    " must be one value when dims is absent (the flattened "
                                    "tensor is rolled)"));
    }
    r.shape = {NumElements(in)};
  } else {
    if (shifts.size() != dims.size()) {
      return AttrError("roll", "shifts",
                       absl::StrCat("= ", Ints(shifts), " and dims = ", Ints(dims),
                                    " must have the same length"));
    }
    r.shape = rank == 0 ? Shape{1} : in;
  }
  r.shifts.assign(r.shape.size(), 0);
  for (size_t i = 0; i < shifts.size(); ++i) {
    int64_t d = 0;
    if (!dims.empty()) {
      ASSIGN_OR_RETURN(d, WrapDim("roll", "dims", dims[i], rank));
    }
    const int64_t size = r.shape[d];
    if (size == 0) continue;
    // Repeated dims roll again; the sum stays in [0, size) so it cannot overflow.
    r.shifts[d] = (r.shifts[d] + (shifts[i] % size + size) % size) % size;
  }
  return r;
}

absl::StatusOr<std::vector<int64_t>> ResolveRepeats(const std::string& op, const Shape& in,
                                                    const Attrs& a) {
  std::vector<int64_t> repeats = a.GetInts(op == "tile" ? "dims" : "repeats");
  const char* attr = op == "tile" ? "dims" : "repeats";
  for (int64_t r : repeats) {
    if (r < 0) {
      return AttrError(op, attr, absl::StrCat("= ", Ints(repeats), " has a negative count"));
    }
  }
  if (repeats.size() < in.size()) {
    if (op == "tile") {
      // torch.tile reads missing counts as leading 1s.
      repeats.insert(repeats.begin(), in.size() - repeats.size(), 1);
    } else {
      return AttrError(op, attr,
                       absl::StrCat("= ", Ints(repeats), " has fewer entries than the input ",
                                    ShapeToString(in), " has dims"));
    }
  }
  return repeats;
}

}  // namespace ops

void RegisterShapeRearrangeOps(OpRegistry& r) {
  OpDef flip = ShapeOp("flip", {RequiredIntsAttr("dims")});
  flip.infer = [](absl::Span<const TensorMeta> in,
                  const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(FlipDims(in[0].shape, a).status());
    return std::vector<TensorMeta>{in[0]};
  };
  flip.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::flip, {g.grad_outputs[0]}, g.attrs.map()));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(flip));

  OpDef roll = ShapeOp("roll", {RequiredIntsAttr("shifts"), IntsAttr("dims")});
  roll.infer = [](absl::Span<const TensorMeta> in,
                  const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(ResolveRoll(in[0].shape, a).status());
    return std::vector<TensorMeta>{in[0]};
  };
  // Rolled back by size - shift per dim (from the resolved shifts, so no negation overflows).
  roll.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    ASSIGN_OR_RETURN(RollSpec spec, ResolveRoll(g.inputs[0].shape(), g.attrs));
    std::vector<int64_t> shifts, dims;
    for (size_t d = 0; d < spec.shape.size(); ++d) {
      shifts.push_back(spec.shifts[d] == 0 ? 0 : spec.shape[d] - spec.shifts[d]);
      dims.push_back(static_cast<int64_t>(d));
    }
    AttrMap attrs = {{"shifts", shifts}};
    if (!g.attrs.GetInts("dims").empty()) attrs["dims"] = dims;
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::roll, {g.grad_outputs[0]}, attrs));
    return std::vector<Tensor>{gx};
  };
  roll.doc = "Without dims the flattened tensor is rolled by the one shift, as in torch.roll.";
  MustAdd(r, std::move(roll));

  for (const char* name : {"repeat", "tile"}) {
    const std::string op = name;
    OpDef d = ShapeOp(op, {RequiredIntsAttr(op == "tile" ? "dims" : "repeats")});
    d.infer = [op](absl::Span<const TensorMeta> in,
                   const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
      ASSIGN_OR_RETURN(Shape s, RepeatedShape(op, in[0].shape, a));
      return std::vector<TensorMeta>{{in[0].dtype, s}};
    };
    d.backward = [op](const GradContext& g) { return RepeatBackward(op, g); };
    d.doc = op == "tile" ? "torch.tile: dims shorter than the input's rank are padded with 1s."
                         : "Tensor.repeat: one count per dim, at least as many as the input has.";
    MustAdd(r, std::move(d));
  }

  MustAdd(r, Triangle("tril"));
  MustAdd(r, Triangle("triu"));
}

}  // namespace tensord
