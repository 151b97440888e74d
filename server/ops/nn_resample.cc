// interpolate (torch.nn.functional.interpolate, modes nearest / linear / bilinear / trilinear).
//
// The public op resolves PyTorch's argument rules (size or scale_factor, one value or one per
// spatial dim, recompute_scale_factor, align_corners only for the interpolating modes) into
// the internal op `upsample`, whose attributes say exactly what the kernels compute: the output
// size, and per spatial dim the scale factor the index formulas use (<= 0: none, in/out then),
// as PyTorch passes scale_factor through to its kernels when recompute_scale_factor is unset.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {
using namespace ops;

// The rank of input each mode takes (nearest: 3 to 5).
bool ModeFitsRank(const std::string& mode, int64_t rank) {
  if (mode == "nearest") return rank >= 3 && rank <= 5;
  if (mode == "linear") return rank == 3;
  if (mode == "bilinear") return rank == 4;
  return mode == "trilinear" && rank == 5;
}

absl::StatusOr<std::vector<Tensor>> Interpolate(OpRunner& run, absl::Span<const Tensor> in,
                                                const Attrs& a) {
  const std::string op = "interpolate";
  const Tensor& x = in[0];
  const std::string mode = a.GetString("mode");
  if (!ModeFitsRank(mode, x.rank())) {
    return ShapeError(op, absl::StrCat("mode '", mode, "' does not take a ", x.rank(), "-d input ",
                                       ShapeToString(x.shape()),
                                       " (nearest: 3-d to 5-d, linear: 3-d, bilinear: 4-d, "
                                       "trilinear: 5-d)"));
  }
  const size_t spatial = static_cast<size_t>(x.rank() - 2);
  if (a.Has("size") == a.Has("scale_factor")) {
    return Error(Reason::kBadAttribute,
                 absl::StrCat(op, ": exactly one of 'size' and 'scale_factor' must be given"),
                 {{"op", op}, {"attribute", "size"}});
  }
  if (mode == "nearest" && a.Has("align_corners")) {
    return AttrError(op, "align_corners",
                     "can only be set with the interpolating modes linear, bilinear, trilinear");
  }
  const bool recompute = a.GetBool("recompute_scale_factor");
  if (recompute && a.Has("size")) {
    return AttrError(op, "recompute_scale_factor", "is not meaningful with an explicit size");
  }
  std::vector<int64_t> out_size;
  std::vector<double> scales(spatial, 0.0);
  if (a.Has("size")) {
    out_size = a.GetInts("size");
    if (out_size.size() == 1) out_size.assign(spatial, out_size[0]);
    if (out_size.size() != spatial) {
      return AttrError(
          op, "size",
          absl::StrCat("must have 1 or ", spatial, " values for input ", ShapeToString(x.shape()),
                       ", got [", absl::StrJoin(a.GetInts("size"), ", "), "]"));
    }
  } else {
    std::vector<double> factors = a.GetFloats("scale_factor");
    if (factors.size() == 1) factors.assign(spatial, factors[0]);
    if (factors.size() != spatial) {
      return AttrError(
          op, "scale_factor",
          absl::StrCat("must have 1 or ", spatial, " values for input ", ShapeToString(x.shape()),
                       ", got ", a.GetFloats("scale_factor").size()));
    }
    for (size_t i = 0; i < spatial; ++i) {
      if (!(factors[i] > 0) || !std::isfinite(factors[i])) {
        return AttrError(op, "scale_factor",
                         absl::StrCat("must be positive and finite, got ", factors[i]));
      }
      out_size.push_back(
          static_cast<int64_t>(std::floor(static_cast<double>(x.dim(i + 2)) * factors[i])));
      if (!recompute) scales[i] = factors[i];
    }
  }
  for (size_t i = 0; i < spatial; ++i) {
    if (x.dim(i + 2) <= 0 || out_size[i] <= 0) {
      return ShapeError(op, absl::StrCat("input and output sizes must be greater than 0, got "
                                         "input ",
                                         ShapeToString(x.shape()), " and output size [",
                                         absl::StrJoin(out_size, ", "), "]"));
    }
  }
  AttrMap attrs = {{"output_size", out_size},
                   {"scales", scales},
                   {"mode", std::string(mode == "nearest" ? "nearest" : "linear")},
                   {"align_corners", a.GetBool("align_corners")}};
  return run.Run(opname::upsample, {x}, std::move(attrs));
}

std::vector<AttrSpec> UpsampleAttrs() {
  return {RequiredIntsAttr("output_size"),
          {"scales", AttrType::kFloats, {}, true},
          StringAttr("mode", "nearest", {"nearest", "linear"}),
          BoolAttr("align_corners", false)};
}

absl::StatusOr<Shape> UpsampleShape(const std::string& op, const Shape& x, const Attrs& a) {
  const std::vector<int64_t> size = a.GetInts("output_size");
  if (x.size() < 3 || x.size() > 5 || size.size() != x.size() - 2 ||
      a.GetFloats("scales").size() != size.size()) {
    return ShapeError(op, absl::StrCat("input ", ShapeToString(x), " does not fit output_size [",
                                       absl::StrJoin(size, ", "), "]"));
  }
  Shape out = x;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] <= 0 || x[i + 2] <= 0) {
      return ShapeError(op, absl::StrCat("input ", ShapeToString(x), " and output_size [",
                                         absl::StrJoin(size, ", "), "] must be positive"));
    }
    out[i + 2] = size[i];
  }
  return out;
}

}  // namespace

void RegisterResampleOps(OpRegistry& r) {
  OpDef d = NewOp("interpolate", "nn", {"input"}, kFloat, Marking::kDifferentiable);
  d.attrs = {IntsAttr("size"),
             {"scale_factor", AttrType::kFloats, {}},
             StringAttr("mode", "nearest", {"nearest", "linear", "bilinear", "trilinear"}),
             {"align_corners", AttrType::kBool, {}},
             {"recompute_scale_factor", AttrType::kBool, {}}};
  d.composite = Interpolate;
  d.doc =
      "torch.nn.functional.interpolate over [N, C, *spatial]: nearest (PyTorch's 'nearest', "
      "floor of dst * scale), linear (3-d), bilinear (4-d), trilinear (5-d); align_corners "
      "defaults to false";
  MustAdd(r, std::move(d));

  OpDef up = NewInternalOp("upsample", "nn", {"input"}, kFloat, Marking::kDifferentiable);
  up.attrs = UpsampleAttrs();
  up.infer = [](absl::Span<const TensorMeta> in,
                const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(Shape out, UpsampleShape("upsample", in[0].shape, a));
    return std::vector<TensorMeta>{{in[0].dtype, out}};
  };
  up.backward = [](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    AttrMap attrs = g.attrs.map();
    attrs["input_size"] = g.inputs[0].shape();
    ASSIGN_OR_RETURN(Tensor gx, g.run.Run1(opname::upsample_backward, {g.grad_outputs[0]}, attrs));
    return std::vector<Tensor>{gx};
  };
  MustAdd(r, std::move(up));

  OpDef back = NewInternalOp("upsample_backward", "nn", {"grad_output"}, kFloat);
  back.attrs = UpsampleAttrs();
  back.attrs.push_back(RequiredIntsAttr("input_size"));
  back.infer = [](absl::Span<const TensorMeta> in,
                  const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    const Shape input_size = a.GetInts("input_size");
    ASSIGN_OR_RETURN(Shape out, UpsampleShape("upsample_backward", input_size, a));
    if (out != in[0].shape) {
      return ShapeError("upsample_backward",
                        absl::StrCat("output gradient ", ShapeToString(in[0].shape),
                                     " does not match the forward output ", ShapeToString(out)));
    }
    return std::vector<TensorMeta>{{in[0].dtype, input_size}};
  };
  MustAdd(r, std::move(back));
}

}  // namespace tensord
