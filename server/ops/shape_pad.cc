// torch.nn.functional.pad (constant, reflect, replicate, circular) and pad_backward, the
// internal op its gradient is written with: every output element reads one input element (or
// the constant), so the gradient adds each output's gradient back to the element it read.
#include "absl/strings/str_join.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/shape_ops.h"

namespace tensord {
namespace {
using namespace ops;

const std::vector<std::string> kModes = {"constant", "reflect", "replicate", "circular"};

std::string PadString(const std::vector<int64_t>& pad) {
  return absl::StrCat("(", absl::StrJoin(pad, ", "), ")");
}

// The checks torch makes on a non-constant mode: it pads the last 1, 2 or 3 dims of an input
// with one or two leading (batch, channel) dims, and each pad must fit the dim it mirrors.
absl::Status CheckNonConstant(const std::string& op, const Shape& in, const PadSpec& s,
                              const std::vector<int64_t>& pad, double value) {
  const int64_t rank = static_cast<int64_t>(in.size());
  const int64_t padded = static_cast<int64_t>(pad.size() / 2);
  if (value != 0) {
    return AttrError(op, "value",
                     absl::StrCat("= ", value, " is only used by mode constant, not ", s.mode));
  }
  if (padded < 1 || padded > 3) {
    return AttrError(op, "pad",
                     absl::StrCat("= ", PadString(pad), ": mode ", s.mode,
                                  " pads the last 1, 2 or 3 dims (2, 4 or 6 values)"));
  }
  if (rank != padded + 1 && rank != padded + 2) {
    return Error(
        Reason::kShapeMismatch,
        absl::StrCat(op, ": mode ", s.mode, " with ", pad.size(), " pad values expects a ",
                     padded + 1, "-d or ", padded + 2, "-d input, got shape ", ShapeToString(in)),
        {{"op", op}, {"shape", ShapeToString(in)}});
  }
  for (int64_t d = rank - padded; d < rank; ++d) {
    const int64_t n = in[d], b = s.before[d], a = s.after[d];
    bool fits = n > 0 && s.out[d] > 0;
    std::string why = "an output of at least 1 element from a non-empty dim";
    if (s.mode == "reflect") {
      fits = fits && b < n && a < n;
      why = "pads smaller than the dim";
    } else if (s.mode == "circular") {
      // Negative pads cut first; the rest wraps around what is left, at most once.
      const int64_t kept = n - std::max<int64_t>(-b, 0) - std::max<int64_t>(-a, 0);
      fits = fits && kept > 0 && b <= kept && a <= kept;
      why = "pads no larger than the dim left after negative pads (it wraps around at most once)";
    }
    if (!fits) {
      return AttrError(op, "pad",
                       absl::StrCat("= ", PadString(pad), " does not fit dim ", d, " of input ",
                                    ShapeToString(in), ": mode ", s.mode, " needs ", why, " (got ",
                                    b, " and ", a, " around size ", n, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace ops {

absl::StatusOr<PadSpec> ResolvePad(const std::string& op, const Shape& in, const Attrs& a) {
  const std::vector<int64_t> pad = a.GetInts("pad");
  const int64_t rank = static_cast<int64_t>(in.size());
  if (pad.size() % 2 != 0) {
    return AttrError(op, "pad",
                     absl::StrCat("= ", PadString(pad), " must have an even number of values"));
  }
  if (static_cast<int64_t>(pad.size()) > 2 * rank) {
    return AttrError(op, "pad",
                     absl::StrCat("= ", PadString(pad), " pads ", pad.size() / 2,
                                  " dims but the input ", ShapeToString(in), " has ", rank));
  }
  PadSpec s;
  s.mode = a.GetString("mode");
  s.before.assign(rank, 0);
  s.after.assign(rank, 0);
  // Like torch: (last dim before, last dim after, second-to-last before, ...).
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    s.before[rank - 1 - i] = pad[2 * i];
    s.after[rank - 1 - i] = pad[2 * i + 1];
  }
  s.out = in;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t n = in[d], b = s.before[d], e = s.after[d];
    // Pads beyond 2^60 cannot give a real size; refusing them keeps n + b + e (dims are at
    // most 2^62) from overflowing.
    constexpr int64_t kMax = int64_t{1} << 60;
    const bool huge = b < -kMax || b > kMax || e < -kMax || e > kMax;
    if (huge || n + b + e < 0) {
      return AttrError(op, "pad",
                       absl::StrCat("= ", PadString(pad), " gives dim ", d, " of input ",
                                    ShapeToString(in), " a negative size"));
    }
    s.out[d] = n + b + e;
  }
  auto count = CheckedNumElements(s.out);
  if (!count.ok()) return WithMetadata(count.status(), {{"op", op}});
  if (s.mode != "constant") RETURN_IF_ERROR(CheckNonConstant(op, in, s, pad, a.GetFloat("value")));
  return s;
}

}  // namespace ops

void RegisterPadOps(OpRegistry& r) {
  OpDef pad = ShapeOp("pad", {}, kAll);
  pad.attrs = {RequiredIntsAttr("pad"), StringAttr("mode", "constant", kModes),
               FloatAttr("value", 0)};
  pad.infer = [](absl::Span<const TensorMeta> in,
                 const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(PadSpec s, ResolvePad("pad", in[0].shape, a));
    const DType d = in[0].dtype;
    // As in PyTorch: reflect and replicate pad floats only; constant and circular any dtype,
    // with a fill value the dtype holds.
    if (!IsFloat(d) && (s.mode == "reflect" || s.mode == "replicate")) {
      return DtypeError("pad", absl::StrCat("mode ", s.mode, " pads float tensors, not ",
                                            DTypeName(d), " (constant and circular pad any)"));
    }
    if (IsInt(d) && !FitsIn(d, a.GetFloat("value"))) {
      return AttrError("pad", "value",
                       absl::StrCat("= ", a.GetFloat("value"), " cannot be stored in a ",
                                    DTypeName(d), " tensor"));
    }
    return std::vector<TensorMeta>{{d, s.out}};
  };
  pad.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Op(opname::pad_backward, {g.grad_outputs[0]},
                                     {{"pad", g.attrs.GetInts("pad")},
                                      {"mode", g.attrs.GetString("mode")},
                                      {"size", g.inputs[0].shape()}}));
    return std::vector<Tensor>{gx};
  };
  pad.doc =
      "torch.nn.functional.pad: pad lists (before, after) pairs from the last dim backwards; "
      "negative values cut. Non-constant modes pad the last 1-3 dims of a 2-5-d input.";
  MustAdd(r, std::move(pad));

  // The input of the forward had shape `size`; the gradient has the forward's output shape.
  OpDef back = ShapeOp("pad_backward", {}, kFloat);
  back.input_names = {"grad"};
  back.attrs = {RequiredIntsAttr("pad"), StringAttr("mode", "constant", kModes),
                RequiredIntsAttr("size")};
  back.internal = true;
  back.infer = [](absl::Span<const TensorMeta> in,
                  const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    const Shape size = a.GetInts("size");
    ASSIGN_OR_RETURN(PadSpec s, ResolvePad("pad_backward", size, a));
    if (s.out != in[0].shape) {
      return Error(Reason::kShapeMismatch,
                   absl::StrCat("pad_backward: grad ", ShapeToString(in[0].shape),
                                " is not the padded shape ", ShapeToString(s.out), " of ",
                                ShapeToString(size)),
                   {{"op", "pad_backward"}, {"shape", ShapeToString(in[0].shape)}});
    }
    return std::vector<TensorMeta>{{in[0].dtype, size}};
  };
  // pad_backward is linear and pad (value 0) is its adjoint.
  back.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx,
                     o.Op(opname::pad, {g.grad_outputs[0]},
                          {{"pad", g.attrs.GetInts("pad")}, {"mode", g.attrs.GetString("mode")}}));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(back));
}

}  // namespace tensord
