#include "server/ops/nn_geometry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/core/status.h"
#include "server/ops/op_helpers.h"

namespace tensord::nn {
namespace {

std::string Pair(const int64_t v[2]) { return absl::StrCat("(", v[0], ", ", v[1], ")"); }

absl::Status CopyPositive(const std::string& op, const Attrs& attrs, const std::string& name,
                          int64_t out[2], int64_t min) {
  ASSIGN_OR_RETURN(std::vector<int64_t> v, ExpandInts(op, name, attrs.GetInts(name), 2));
  for (int i = 0; i < 2; ++i) {
    if (v[i] < min) {
      return ops::AttrError(op, name,
                            absl::StrCat("must be ", min == 0 ? "non-negative" : "positive",
                                         ", got [", absl::StrJoin(v, ", "), "]"));
    }
    out[i] = v[i];
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MatmulPlan> PlanBatchMatmul(const std::string& op, const Shape& a, const Shape& b,
                                           bool transpose_a, bool transpose_b) {
  if (a.size() < 2 || b.size() < 2) {
    return ops::ShapeError(op, absl::StrCat("operands must have at least 2 dims, got ",
                                            ShapeToString(a), " and ", ShapeToString(b)));
  }
  const size_t ra = a.size(), rb = b.size();
  MatmulPlan p;
  p.n = transpose_a ? a[ra - 1] : a[ra - 2];
  p.k = transpose_a ? a[ra - 2] : a[ra - 1];
  const int64_t kb = transpose_b ? b[rb - 1] : b[rb - 2];
  p.m = transpose_b ? b[rb - 2] : b[rb - 1];
  if (p.k != kb) {
    return Error(Reason::kShapeMismatch,
                 absl::StrCat(op, ": shapes ", ShapeToString(a), " and ", ShapeToString(b),
                              " cannot be multiplied (inner dims ", p.k, " and ", kb, " differ)"),
                 {{"op", op}, {"shape", ShapeToString(a)}, {"other_shape", ShapeToString(b)}});
  }
  Shape ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  auto batch = BroadcastShapes(ab, bb);
  if (!batch.ok()) {
    return Error(Reason::kShapeMismatch,
                 absl::StrCat(op, ": batch dims of ", ShapeToString(a), " and ", ShapeToString(b),
                              " do not broadcast"),
                 {{"op", op}, {"shape", ShapeToString(a)}, {"other_shape", ShapeToString(b)}});
  }
  p.batch = *batch;
  p.a_batch.assign(p.batch.size() - ab.size(), 1);
  p.a_batch.insert(p.a_batch.end(), ab.begin(), ab.end());
  p.b_batch.assign(p.batch.size() - bb.size(), 1);
  p.b_batch.insert(p.b_batch.end(), bb.begin(), bb.end());
  p.out = p.batch;
  p.out.push_back(p.n);
  p.out.push_back(p.m);
  return p;
}

absl::StatusOr<MatmulPlan> PlanMatmul(const std::string& op, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) {
    return ShapeErrorWithShapes(op, a, b, "both arguments need at least 1 dimension");
  }
  Shape pa = a, pb = b;
  if (a.size() == 1) pa.insert(pa.begin(), 1);
  if (b.size() == 1) pb.push_back(1);
  auto plan = PlanBatchMatmul(op, pa, pb, false, false);
  if (!plan.ok()) {
    // Report the caller's shapes, not the promoted ones.
    if (a.size() == 1 || b.size() == 1) {
      return ShapeErrorWithShapes(op, a, b, "cannot be multiplied (inner dims differ)");
    }
    return plan.status();
  }
  MatmulPlan p = *std::move(plan);
  p.out = p.batch;
  if (a.size() > 1) p.out.push_back(p.n);
  if (b.size() > 1) p.out.push_back(p.m);
  return p;
}

absl::Status ShapeErrorWithShapes(const std::string& op, const Shape& a, const Shape& b,
                                  const std::string& what) {
  return Error(
      Reason::kShapeMismatch,
      absl::StrCat(op, ": shapes ", ShapeToString(a), " and ", ShapeToString(b), " ", what),
      {{"op", op}, {"shape", ShapeToString(a)}, {"other_shape", ShapeToString(b)}});
}

absl::StatusOr<std::vector<int64_t>> ExpandInts(const std::string& op, const std::string& attr,
                                                const std::vector<int64_t>& value, size_t n) {
  if (value.size() == 1) return std::vector<int64_t>(n, value[0]);
  if (value.size() != n) {
    return ops::AttrError(op, attr,
                          absl::StrCat("must be one value or ", n, " values, got [",
                                       absl::StrJoin(value, ", "), "]"));
  }
  return value;
}

absl::StatusOr<Conv2dParams> ReadConv2dParams(const std::string& op, const Attrs& attrs) {
  Conv2dParams p;
  RETURN_IF_ERROR(CopyPositive(op, attrs, "stride", p.stride, 1));
  RETURN_IF_ERROR(CopyPositive(op, attrs, "padding", p.padding, 0));
  RETURN_IF_ERROR(CopyPositive(op, attrs, "dilation", p.dilation, 1));
  p.groups = attrs.GetInt("groups");
  if (p.groups < 1) {
    return ops::AttrError(op, "groups", absl::StrCat("must be positive, got ", p.groups));
  }
  return p;
}

bool HasPaddingString(const Attrs& attrs) {
  return attrs.Has("padding") && std::holds_alternative<std::string>(attrs.map().at("padding"));
}

absl::StatusOr<PaddingFromString> ResolvePaddingString(const std::string& op, const Attrs& attrs,
                                                       const Shape& weight, int spatial) {
  const std::string mode = attrs.GetString("padding");
  PaddingFromString p;
  if (mode == "valid") {
    p.before = p.after = std::vector<int64_t>(spatial, 0);
    return p;
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> stride,
                   ExpandInts(op, "stride", attrs.GetInts("stride"), spatial));
  ASSIGN_OR_RETURN(std::vector<int64_t> dilation,
                   ExpandInts(op, "dilation", attrs.GetInts("dilation"), spatial));
  if (std::any_of(stride.begin(), stride.end(), [](int64_t s) { return s != 1; })) {
    return ops::AttrError(op, "padding",
                          absl::StrCat("'same' is not supported for strided convolutions (stride [",
                                       absl::StrJoin(stride, ", "), "])"));
  }
  if (std::any_of(dilation.begin(), dilation.end(), [](int64_t d) { return d < 1; })) {
    return ops::AttrError(
        op, "dilation",
        absl::StrCat("must be positive, got [", absl::StrJoin(dilation, ", "), "]"));
  }
  if (weight.size() != static_cast<size_t>(spatial) + 2) {
    return ops::ShapeError(op, absl::StrCat("weight must be ", spatial + 2,
                                            "-d [out_channels, "
                                            "in_channels/groups, kernel...], got ",
                                            ShapeToString(weight)));
  }
  for (int i = 0; i < spatial; ++i) {
    const int64_t total = dilation[i] * (weight[2 + i] - 1);
    p.before.push_back(total / 2);
    p.after.push_back(total - total / 2);
  }
  return p;
}

Nchw AsNchw(const Shape& s) {
  if (s.size() == 3) return {1, s[0], s[1], s[2]};
  return {s[0], s[1], s[2], s[3]};
}

int64_t PoolOutputSize(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                       bool ceil_mode) {
  const int64_t num = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  // Division rounding toward negative infinity, as PyTorch's div_rtn.
  int64_t q = num / stride;
  if ((num % stride != 0) && ((num < 0) != (stride < 0))) --q;
  int64_t out = q + 1;
  // The last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

absl::StatusOr<Pool2dParams> ReadPool2dParams(const std::string& op, const Attrs& attrs,
                                              bool max_pool) {
  Pool2dParams p;
  RETURN_IF_ERROR(CopyPositive(op, attrs, "kernel_size", p.kernel, 1));
  if (attrs.GetInts("stride").empty()) {
    p.stride[0] = p.kernel[0];
    p.stride[1] = p.kernel[1];
  } else {
    RETURN_IF_ERROR(CopyPositive(op, attrs, "stride", p.stride, 1));
  }
  RETURN_IF_ERROR(CopyPositive(op, attrs, "padding", p.padding, 0));
  if (max_pool) RETURN_IF_ERROR(CopyPositive(op, attrs, "dilation", p.dilation, 1));
  p.ceil_mode = attrs.GetBool("ceil_mode");
  for (int i = 0; i < 2; ++i) {
    const int64_t eff = max_pool ? ((p.kernel[i] - 1) * p.dilation[i] + 1) : p.kernel[i];
    if (p.padding[i] > eff / 2) {
      return ops::AttrError(
          op, "padding",
          absl::StrCat("must be at most half of the ", max_pool ? "effective " : "", "kernel size ",
                       Pair(p.kernel), ", got ", Pair(p.padding)));
    }
  }
  return p;
}

absl::StatusOr<Shape> Pool2dOutputShape(const std::string& op, const Shape& input,
                                        const Pool2dParams& p) {
  if (input.size() != 3 && input.size() != 4) {
    return ops::ShapeError(op, absl::StrCat("input must be 3-d (unbatched) or 4-d (batched), got ",
                                            ShapeToString(input)));
  }
  const size_t r = input.size();
  for (size_t d = r - 3; d < r; ++d) {
    if (input[d] == 0) {
      return ops::ShapeError(
          op, absl::StrCat("input ", ShapeToString(input), " has an empty non-batch dimension"));
    }
  }
  Shape out = input;
  for (int i = 0; i < 2; ++i) {
    out[r - 2 + i] = PoolOutputSize(input[r - 2 + i], p.kernel[i], p.padding[i], p.stride[i],
                                    p.dilation[i], p.ceil_mode);
    if (out[r - 2 + i] < 1) {
      return ops::ShapeError(
          op, absl::StrCat("input ", ShapeToString(input), " with kernel ", Pair(p.kernel),
                           " gives output ", ShapeToString(out), ", which is too small"));
    }
  }
  return out;
}

namespace {

absl::StatusOr<std::vector<int64_t>> IntsAtLeast(const std::string& op, const Attrs& attrs,
                                                 const std::string& name, size_t n, int64_t min) {
  ASSIGN_OR_RETURN(std::vector<int64_t> v, ExpandInts(op, name, attrs.GetInts(name), n));
  for (int64_t x : v) {
    if (x < min) {
      return ops::AttrError(op, name,
                            absl::StrCat("must be ", min == 0 ? "non-negative" : "positive",
                                         ", got [", absl::StrJoin(v, ", "), "]"));
    }
  }
  return v;
}

std::string Spatial(const Shape& s, size_t from) {
  return absl::StrJoin(s.begin() + static_cast<std::ptrdiff_t>(from), s.end(), " x ");
}

}  // namespace

absl::StatusOr<ConvNdParams> ReadConvNdParams(const std::string& op, const Attrs& attrs,
                                              int spatial, bool transposed) {
  ConvNdParams p;
  p.spatial = spatial;
  p.transposed = transposed;
  const size_t n = static_cast<size_t>(spatial);
  ASSIGN_OR_RETURN(p.stride, IntsAtLeast(op, attrs, "stride", n, 1));
  ASSIGN_OR_RETURN(p.padding, IntsAtLeast(op, attrs, "padding", n, 0));
  ASSIGN_OR_RETURN(p.dilation, IntsAtLeast(op, attrs, "dilation", n, 1));
  p.output_padding.assign(n, 0);
  if (transposed) {
    ASSIGN_OR_RETURN(p.output_padding, IntsAtLeast(op, attrs, "output_padding", n, 0));
    for (size_t i = 0; i < n; ++i) {
      if (p.output_padding[i] >= std::max(p.stride[i], p.dilation[i])) {
        return ops::AttrError(
            op, "output_padding",
            absl::StrCat("must be smaller than either stride or dilation, got output_padding [",
                         absl::StrJoin(p.output_padding, ", "), "], stride [",
                         absl::StrJoin(p.stride, ", "), "], dilation [",
                         absl::StrJoin(p.dilation, ", "), "]"));
      }
    }
  }
  p.groups = attrs.GetInt("groups");
  if (p.groups < 1) {
    return ops::AttrError(op, "groups", absl::StrCat("must be positive, got ", p.groups));
  }
  return p;
}

int64_t ConvNdOutChannels(const Shape& weight, const ConvNdParams& p) {
  return p.transposed ? weight[1] * p.groups : weight[0];
}

absl::StatusOr<Shape> ConvNdOutputShape(const std::string& op, const Shape& input,
                                        const Shape& weight, const ConvNdParams& p) {
  const size_t sp = static_cast<size_t>(p.spatial);
  if (weight.size() != sp + 2) {
    return ops::ShapeError(op, absl::StrCat("weight must be ", sp + 2, "-d [",
                                            p.transposed ? "in_channels, out_channels/groups"
                                                         : "out_channels, in_channels/groups",
                                            ", kernel...], got ", ShapeToString(weight)));
  }
  if (input.size() != sp + 1 && input.size() != sp + 2) {
    return ops::ShapeError(op, absl::StrCat("input must be ", sp + 1, "-d (unbatched) or ", sp + 2,
                                            "-d (batched), got ", ShapeToString(input)));
  }
  const size_t c_dim = input.size() - sp - 1;
  const int64_t channels = input[c_dim];
  if (!p.transposed && weight[0] % p.groups != 0) {
    return ops::ShapeError(op, absl::StrCat("groups=", p.groups, " does not divide the ", weight[0],
                                            " output channels of weight ", ShapeToString(weight)));
  }
  if (p.transposed && weight[0] % p.groups != 0) {
    return ops::ShapeError(op, absl::StrCat("groups=", p.groups, " does not divide the ", weight[0],
                                            " input channels of weight ", ShapeToString(weight)));
  }
  const int64_t expected = p.transposed ? weight[0] : weight[1] * p.groups;
  if (channels != expected) {
    return ops::ShapeError(
        op, absl::StrCat("groups=", p.groups, ", weight of shape ", ShapeToString(weight),
                         " expects input ", ShapeToString(input), " to have ", expected,
                         " channels, but it has ", channels));
  }
  Shape out = input;
  out[c_dim] = ConvNdOutChannels(weight, p);
  bool too_small = false;
  for (size_t i = 0; i < sp; ++i) {
    const int64_t in = input[c_dim + 1 + i];
    const int64_t eff = p.dilation[i] * (weight[2 + i] - 1) + 1;
    if (p.transposed) {
      out[c_dim + 1 + i] = (in - 1) * p.stride[i] - 2 * p.padding[i] + eff + p.output_padding[i];
      too_small |= out[c_dim + 1 + i] < 1;
    } else {
      const int64_t padded = in + 2 * p.padding[i];
      if (padded < eff) {
        return ops::ShapeError(
            op, absl::StrCat("padded input size ", padded,
                             " is smaller than the dilated kernel size ", eff, " (input ",
                             ShapeToString(input), ", weight ", ShapeToString(weight), ")"));
      }
      out[c_dim + 1 + i] = (padded - eff) / p.stride[i] + 1;
    }
  }
  if (too_small) {
    return ops::ShapeError(op, absl::StrCat("input size per channel (", Spatial(input, c_dim + 1),
                                            ") gives output size (", Spatial(out, c_dim + 1),
                                            "), which is too small"));
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> ReadAdaptiveOutputSize(const std::string& op,
                                                            const Attrs& attrs) {
  ASSIGN_OR_RETURN(std::vector<int64_t> v,
                   ExpandInts(op, "output_size", attrs.GetInts("output_size"), 2));
  for (int64_t x : v) {
    if (x < kKeepInputSize) {
      return ops::AttrError(op, "output_size",
                            absl::StrCat("must be non-negative, or -1 to keep the input's size "
                                         "(PyTorch's None), got [",
                                         absl::StrJoin(v, ", "), "]"));
    }
  }
  return v;
}

absl::StatusOr<Shape> AdaptivePool2dOutputShape(const std::string& op, const Shape& input,
                                                const std::vector<int64_t>& output_size) {
  if (input.size() != 3 && input.size() != 4) {
    return ops::ShapeError(op, absl::StrCat("input must be 3-d (unbatched) or 4-d (batched), got ",
                                            ShapeToString(input)));
  }
  const size_t r = input.size();
  for (size_t d = r - 3; d < r; ++d) {
    if (input[d] == 0) {
      return ops::ShapeError(
          op, absl::StrCat("input ", ShapeToString(input), " has an empty non-batch dimension"));
    }
  }
  Shape out = input;
  for (size_t i = 0; i < 2; ++i) {
    if (output_size[i] != kKeepInputSize) out[r - 2 + i] = output_size[i];
  }
  return out;
}

Correlation MakeCorrelation(const Shape& x, const Shape& w, const Shape& y, const ConvNdParams& p) {
  Correlation g;
  const size_t sp = static_cast<size_t>(p.spatial);
  const size_t c = x.size() == sp + 2 ? 1 : 0;
  g.n = c == 1 ? x[0] : 1;
  g.xc = x[c];
  g.yc = y[c];
  g.groups = p.groups;
  g.cin_g = w[1];
  g.cout_g = w[0] / p.groups;
  for (int i = 0; i < 3; ++i) {
    const int j = i - (3 - p.spatial);
    const bool unit = j < 0;
    g.xs[i] = unit ? 1 : x[c + 1 + j];
    g.ys[i] = unit ? 1 : y[c + 1 + j];
    g.k[i] = unit ? 1 : w[2 + j];
    g.stride[i] = unit ? 1 : p.stride[j];
    g.pad[i] = unit ? 0 : p.padding[j];
    g.dil[i] = unit ? 1 : p.dilation[j];
  }
  return g;
}

}  // namespace tensord::nn
